#include "launcher/cli/flags.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <csignal>
#include <optional>
#include <utility>

#include <fmt/format.h>

namespace ctrun::launcher {
namespace {

#ifdef CTRUN_VERSION
constexpr std::string_view kVersion = CTRUN_VERSION;
#else
constexpr std::string_view kVersion = "0.1.0";  // keep in step with project() in CMakeLists.txt
#endif

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Decimal integer, optional sign, nothing else (no spaces, no "1e3").
std::optional<long long> ParseInt(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  long long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// A finite decimal number ("0.5", "30", "1e2").
std::optional<double> ParseNumber(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

Status Bad(std::string msg) { return Status::InvalidArgument(std::move(msg)); }

Result<Seconds> PositiveSeconds(std::string_view v, std::string_view example) {
  auto n = ParseNumber(Trim(v));
  if (!n || *n <= 0) return Bad(fmt::format("must be a number of seconds > 0 (e.g. {})", example));
  return Seconds(*n);
}

Result<bool> ParseConfBool(std::string_view v) {
  std::string s = Lower(v);
  if (s == "1" || s == "true" || s == "t" || s == "yes" || s == "y") return true;
  if (s == "0" || s == "false" || s == "f" || s == "no" || s == "n") return false;
  return Bad("must be a boolean (use 1/true/t/yes/y or 0/false/f/no/n)");
}

Result<StreamSelection> ParseStreams(std::string_view v) {
  constexpr std::string_view kFix = "(use 0-3, or a map of single-digit local rank to 0-3 such as 0:1,1:2)";
  StreamSelection sel;
  if (v.size() == 1 && v[0] >= '0' && v[0] <= '3') {
    sel.all = v[0] - '0';
    return sel;
  }
  for (std::string_view item : Split(v, ',')) {
    if (item.size() != 3 || !std::isdigit(static_cast<unsigned char>(item[0])) || item[1] != ':' ||
        item[2] < '0' || item[2] > '3') {
      return Bad(fmt::format("'{}' is not a stream selection {}", item, kFix));
    }
    sel.per_rank[item[0] - '0'] = item[2] - '0';
  }
  return sel;
}

Status ApplyStreams(std::string_view v, StreamSelection& out) {
  auto s = ParseStreams(v);
  if (!s.ok()) return s.status();
  out = std::move(*s);
  return Status::Ok();
}

Status ApplyLocalRanksFilter(std::string_view v, LaunchConfig& c) {
  if (v.empty()) {
    c.local_ranks_filter.reset();
    return Status::Ok();
  }
  std::set<int> ranks;
  for (std::string_view r : Split(v, ',')) {
    auto n = ParseInt(Trim(r));
    if (!n || *n < 0 || *n > 1'000'000) {
      return Bad(fmt::format("'{}' is not a local rank (use a comma list of integers >= 0, e.g. 0,3)", Trim(r)));
    }
    ranks.insert(static_cast<int>(*n));
  }
  c.local_ranks_filter = std::move(ranks);
  return Status::Ok();
}

struct NamedSignal {
  std::string_view name;
  int number;
};
constexpr NamedSignal kSignals[] = {{"SIGTERM", SIGTERM}, {"SIGINT", SIGINT},   {"SIGHUP", SIGHUP},
                                    {"SIGQUIT", SIGQUIT}, {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}};

// Names are case-insensitive and the SIG prefix is optional ("usr1" = SIGUSR1);
// repeats are dropped, the first occurrence keeps its place.
Status ApplySignals(std::string_view v, LaunchConfig& c) {
  std::vector<int> numbers;
  for (std::string_view item : Split(v, ',')) {
    std::string name(Trim(item));
    for (char& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (name.rfind("SIG", 0) != 0) name = "SIG" + name;
    auto it = std::find_if(std::begin(kSignals), std::end(kSignals),
                           [&](const NamedSignal& s) { return s.name == name; });
    if (it == std::end(kSignals)) {
      return Bad(fmt::format("'{}' is not a signal ctrun forwards (use a comma list of "
                             "SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2)",
                             Trim(item)));
    }
    if (std::find(numbers.begin(), numbers.end(), it->number) == numbers.end()) {
      numbers.push_back(it->number);
    }
  }
  c.signals_to_handle = std::move(numbers);
  return Status::Ok();
}

constexpr std::string_view kRdzvConfKeys =
    "join_timeout, last_call_timeout, close_timeout, heartbeat_timeout, keep_alive_interval, "
    "keep_alive_max_attempt, read_timeout, timeout, is_host, store_type, use_libuv, token_file, rank, "
    "tls_cert, tls_key, tls_ca, tls_server_name";

Status ApplyRdzvConfPair(std::string_view key, std::string_view value, RdzvConf& conf) {
  const std::pair<std::string_view, Seconds RdzvConf::*> durations[] = {
      {"join_timeout", &RdzvConf::join_timeout},
      {"last_call_timeout", &RdzvConf::last_call_timeout},
      {"close_timeout", &RdzvConf::close_timeout},
      {"heartbeat_timeout", &RdzvConf::heartbeat_timeout},
      {"keep_alive_interval", &RdzvConf::keep_alive_interval},
      {"read_timeout", &RdzvConf::read_timeout},
      {"timeout", &RdzvConf::timeout}};
  auto fail = [&](const Status& s) { return Bad(fmt::format("{}: {}", key, s.message())); };
  for (const auto& [name, field] : durations) {
    if (key != name) continue;
    auto secs = PositiveSeconds(value, "30");
    if (!secs.ok()) return fail(secs.status());
    conf.*field = *secs;
    return Status::Ok();
  }
  if (key == "keep_alive_max_attempt") {
    auto n = ParseInt(value);
    if (!n || *n <= 0 || *n > 1'000'000) return Bad("keep_alive_max_attempt: must be a positive integer (e.g. 3)");
    conf.keep_alive_max_attempt = static_cast<int>(*n);
  } else if (key == "is_host" || key == "use_libuv") {
    auto b = ParseConfBool(value);
    if (!b.ok()) return fail(b.status());
    if (key == "is_host") {
      conf.is_host = *b;
    } else {
      conf.use_libuv = *b;
    }
  } else if (key == "store_type") {
    std::string t = Lower(value);
    if (t != "tcp" && t != "file") return Bad("store_type: must be tcp or file");
    conf.store_type = t;
  } else if (key == "token_file") {
    conf.token_file = std::string(value);
  } else if (key == "tls_cert") {
    conf.tls_cert = std::string(value);
  } else if (key == "tls_key") {
    conf.tls_key = std::string(value);
  } else if (key == "tls_ca") {
    conf.tls_ca = std::string(value);
  } else if (key == "tls_server_name") {
    conf.tls_server_name = std::string(value);
  } else if (key == "rank") {
    auto n = ParseInt(value);
    if (!n || *n < 0) return Bad("rank: must be an integer >= 0 (e.g. 0)");
  } else {
    return Bad(fmt::format("unknown key '{}' (use only: {})", key, kRdzvConfKeys));
  }
  return Status::Ok();
}

Status ApplyRdzvConf(std::string_view v, LaunchConfig& c) {
  RdzvConf conf;
  v = Trim(v);
  if (!v.empty()) {
    for (std::string_view kv : Split(v, ',')) {
      size_t eq = kv.find('=');
      std::string_view key = Trim(kv.substr(0, eq));
      if (key.empty()) return Bad("empty key (use KEY=VALUE,KEY=VALUE)");
      std::string_view value = eq == std::string_view::npos ? "" : Trim(kv.substr(eq + 1));
      if (value.empty()) return Bad(fmt::format("key '{}' has no value (use {}=VALUE)", key, key));
      CTRUN_RETURN_IF_ERROR(ApplyRdzvConfPair(key, value, conf));
      conf.given[std::string(key)] = std::string(value);
    }
  }
  c.rdzv_conf = std::move(conf);
  return Status::Ok();
}

Status ApplyNnodes(std::string_view v, LaunchConfig& c) {
  constexpr std::string_view kFix = "(use N or MIN:MAX with 0 < MIN <= MAX)";
  std::vector<std::string_view> parts = Split(v, ':');
  std::optional<long long> lo = parts.size() <= 2 ? ParseInt(parts[0]) : std::nullopt;
  std::optional<long long> hi = parts.size() == 2 ? ParseInt(parts[1]) : lo;
  if (!lo || !hi) return Bad(fmt::format("not a node count {}", kFix));
  if (*lo <= 0 || *hi <= 0) return Bad(fmt::format("node counts must be positive {}", kFix));
  if (*lo > *hi) return Bad("MIN must not exceed MAX (use MIN:MAX with 0 < MIN <= MAX)");
  if (*hi > 1'000'000) return Bad(fmt::format("node count is too large {}", kFix));
  c.min_nodes = static_cast<int>(*lo);
  c.max_nodes = static_cast<int>(*hi);
  return Status::Ok();
}

Status ApplyNproc(std::string_view v, LaunchConfig& c) {
  if (v == "auto" || v == "cpu" || v == "gpu") {
    c.nproc_kind = v == "auto" ? NprocKind::kAuto : v == "cpu" ? NprocKind::kCpu : NprocKind::kGpu;
    return Status::Ok();
  }
  if (v == "xpu") return Bad("ctrun supports NVIDIA GPUs only (use a number, auto, cpu or gpu)");
  auto n = ParseInt(v);
  if (!n || *n <= 0 || *n > 1'000'000) {
    return Bad("must be a positive integer, auto, cpu or gpu (e.g. 8)");
  }
  c.nproc_kind = NprocKind::kNumber;
  c.nproc_per_node = static_cast<int>(*n);
  return Status::Ok();
}

Status ApplyBackend(std::string_view v, LaunchConfig& c) {
  const std::pair<std::string_view, RdzvBackend> names[] = {
      {"static", RdzvBackend::kStatic}, {"c10d", RdzvBackend::kC10d},      {"grpc", RdzvBackend::kC10d},
      {"etcd", RdzvBackend::kEtcd},     {"etcd-v2", RdzvBackend::kEtcdV2}, {"etcd-v3", RdzvBackend::kEtcdV3}};
  for (const auto& [name, backend] : names) {
    if (v == name) {
      c.rdzv_backend = backend;
      return Status::Ok();
    }
  }
  return Bad("unknown backend (use static, c10d, grpc, etcd, etcd-v2 or etcd-v3)");
}

Status ApplyEndpoint(std::string_view v, LaunchConfig& c) {
  if (!Trim(v).empty()) {
    auto e = ParseEndpoint(v, 0);
    if (!e.ok()) return e.status();
  }
  c.rdzv_endpoint = std::string(Trim(v));
  return Status::Ok();
}

Status ApplyNonNegativeInt(std::string_view v, int& out, std::string_view example) {
  auto n = ParseInt(v);
  if (!n || *n < 0 || *n > 1'000'000'000) return Bad(fmt::format("must be an integer >= 0 (e.g. {})", example));
  out = static_cast<int>(*n);
  return Status::Ok();
}

Status ApplyChoice(std::string_view v, std::initializer_list<std::string_view> choices, std::string& out) {
  if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
    std::string list;
    for (std::string_view ch : choices) list += (list.empty() ? "" : ", ") + std::string(ch);
    return Bad(fmt::format("not a valid choice (use one of: {})", list));
  }
  out = std::string(v);
  return Status::Ok();
}

// 0 turns the feature off; otherwise a finite number of seconds > 0.
Status ApplyTimeoutOrOff(std::string_view v, Seconds& out, std::string_view example) {
  auto n = ParseNumber(Trim(v));
  if (!n || *n < 0) return Bad(fmt::format("must be a number of seconds >= 0, 0 = off (e.g. {})", example));
  out = Seconds(*n);
  return Status::Ok();
}

Status ApplySwitch(std::string_view v, bool& out) {
  out = v == "1";
  return Status::Ok();
}

std::optional<std::string> NoneIfEmpty(std::string_view v) {
  if (v.empty()) return std::nullopt;
  return std::string(v);
}

#define CTRUN_APPLY(body) +[](std::string_view v, LaunchConfig& c) -> Status { body }

std::vector<FlagSpec> BuildTable() {
  using G = HelpGroup;
  using K = FlagKind;
  return {
      {"--nnodes", {"--nnodes"}, "PET_NNODES", "1:1", K::kValue, CTRUN_APPLY(return ApplyNnodes(v, c);),
       "MIN:MAX", "Number of nodes, or the range MIN:MAX of nodes for an elastic job.", G::kSize},
      {"--nproc-per-node", {"--nproc-per-node", "--nproc_per_node"}, "PET_NPROC_PER_NODE", "1", K::kValue,
       CTRUN_APPLY(return ApplyNproc(v, c);), "NPROC",
       "Workers per node: a positive integer, auto (GPUs if any, else CPUs), cpu or gpu.", G::kSize},

      {"--rdzv-backend", {"--rdzv-backend", "--rdzv_backend"}, "PET_RDZV_BACKEND", "static", K::kValue,
       CTRUN_APPLY(return ApplyBackend(v, c);), "BACKEND",
       "Rendezvous backend: static, c10d (ctrun's gRPC rendezvous; grpc is an alias), etcd, etcd-v2, "
       "etcd-v3.",
       G::kRendezvous},
      {"--rdzv-endpoint", {"--rdzv-endpoint", "--rdzv_endpoint"}, "PET_RDZV_ENDPOINT", "", K::kValue,
       CTRUN_APPLY(return ApplyEndpoint(v, c);), "HOST[:PORT]",
       "Rendezvous endpoint, host[:port] or [v6]:port; c10d's default port is 29400.", G::kRendezvous},
      {"--rdzv-id", {"--rdzv-id", "--rdzv_id"}, "PET_RDZV_ID", "none", K::kValue,
       CTRUN_APPLY(if (v.empty()) return Bad("run id must not be empty (e.g. --rdzv-id job42)");
                   c.rdzv_id = std::string(v); return Status::Ok();),
       "ID", "User-defined job id; jobs sharing an endpoint are kept apart by it.", G::kRendezvous},
      {"--rdzv-conf", {"--rdzv-conf", "--rdzv_conf"}, "PET_RDZV_CONF", "", K::kValue,
       CTRUN_APPLY(return ApplyRdzvConf(v, c);), "K=V,...",
       "Extra rendezvous settings, e.g. join_timeout=600,read_timeout=60.", G::kRendezvous},
      {"--standalone", {"--standalone"}, "PET_STANDALONE", "0", K::kSwitch,
       CTRUN_APPLY(return ApplySwitch(v, c.standalone);), "",
       "Single-node job: c10d rendezvous on localhost, a free port and a random run id.", G::kRendezvous},
      {"--node-rank", {"--node-rank", "--node_rank"}, "PET_NODE_RANK", "0", K::kValue,
       CTRUN_APPLY(return ApplyNonNegativeInt(v, c.node_rank, "0");), "RANK",
       "Rank of this node (static backend only).", G::kRendezvous},
      {"--master-addr", {"--master-addr", "--master_addr"}, "PET_MASTER_ADDR", "127.0.0.1", K::kValue,
       CTRUN_APPLY(if (v.empty()) return Bad("address must not be empty (e.g. --master-addr 10.0.0.1)");
                   c.master_addr = std::string(v); return Status::Ok();),
       "ADDR", "Address of the node-rank-0 node (static backend with no --rdzv-endpoint).", G::kRendezvous},
      {"--master-port", {"--master-port", "--master_port"}, "PET_MASTER_PORT", "29500", K::kValue,
       CTRUN_APPLY(auto n = ParseInt(v);
                   if (!n || *n < 1 || *n > 65535) return Bad("port must be an integer from 1 to 65535");
                   c.master_port = static_cast<int>(*n); return Status::Ok();),
       "PORT", "Port on the master node (static backend with no --rdzv-endpoint).", G::kRendezvous},
      {"--local-addr", {"--local-addr", "--local_addr"}, "PET_LOCAL_ADDR", nullptr, K::kValue,
       CTRUN_APPLY(c.local_addr = NoneIfEmpty(v); return Status::Ok();), "ADDR",
       "Address this node advertises to the others (default: its FQDN).", G::kRendezvous},

      {"--max-restarts", {"--max-restarts", "--max_restarts"}, "PET_MAX_RESTARTS", "0", K::kValue,
       CTRUN_APPLY(return ApplyNonNegativeInt(v, c.max_restarts, "3");), "N",
       "Worker group restarts allowed after failures before the job fails.", G::kLaunch},
      {"--monitor-interval", {"--monitor-interval", "--monitor_interval"}, "PET_MONITOR_INTERVAL", "0.1",
       K::kValue,
       CTRUN_APPLY(auto s = PositiveSeconds(v, "0.1"); if (!s.ok()) return s.status();
                   c.monitor_interval = *s; return Status::Ok();),
       "SECONDS", "Accepted for compatibility; ctrun sees worker exits at once.", G::kLaunch},
      {"--start-method", {"--start-method", "--start_method"}, "PET_START_METHOD", "spawn", K::kValue,
       CTRUN_APPLY(return ApplyChoice(v, {"spawn", "fork", "forkserver"}, c.start_method);), "METHOD",
       "spawn, fork or forkserver; accepted for compatibility.", G::kLaunch},
      {"--event-log-handler", {"--event-log-handler", "--event_log_handler"}, "PET_EVENT_LOG_HANDLER", "null",
       K::kValue, CTRUN_APPLY(c.event_log_handler = std::string(v); return Status::Ok();), "NAME",
       "Events sink; accepted for compatibility.", G::kLaunch},
      {"--role", {"--role"}, "PET_ROLE", "default", K::kValue,
       CTRUN_APPLY(if (v.empty()) return Bad("role must not be empty (e.g. --role trainer)");
                   c.role = std::string(v); return Status::Ok();),
       "ROLE", "Role name of the workers (ROLE_NAME, log prefix).", G::kLaunch},
      {"--module", {"-m", "--module"}, "PET_MODULE", "0", K::kSwitch,
       CTRUN_APPLY(return ApplySwitch(v, c.module);), "", "Run the script as a module: python -u -m SCRIPT.",
       G::kLaunch},
      {"--no-python", {"--no-python", "--no_python"}, "PET_NO_PYTHON", "0", K::kSwitch,
       CTRUN_APPLY(return ApplySwitch(v, c.no_python);), "",
       "Execute SCRIPT directly instead of through python.", G::kLaunch},
      {"--run-path", {"--run-path", "--run_path"}, "PET_RUN_PATH", "0", K::kSwitch,
       CTRUN_APPLY(return ApplySwitch(v, c.run_path);), "",
       "Run an absolute script path; ctrun runs it as python -u SCRIPT.", G::kLaunch},
      {"--signals-to-handle", {"--signals-to-handle", "--signals_to_handle"}, "PET_SIGNALS_TO_HANDLE",
       "SIGTERM,SIGINT,SIGHUP,SIGQUIT", K::kValue, CTRUN_APPLY(return ApplySignals(v, c);), "SIGNALS",
       "Signals forwarded to the workers (also SIGUSR1, SIGUSR2; SIG prefix and case optional).", G::kLaunch},
      {"--numa-binding", {"--numa-binding", "--numa_binding"}, "", nullptr, K::kValue,
       CTRUN_APPLY(std::string s; CTRUN_RETURN_IF_ERROR(
                       ApplyChoice(v, {"node", "socket", "exclusive", "core-complex"}, s));
                   c.numa_binding = s; return Status::Ok();),
       "MODE", "NUMA binding of worker i to GPU i: node, socket, exclusive or core-complex.", G::kLaunch},

      {"--log-dir", {"--log-dir", "--log_dir"}, "PET_LOG_DIR", nullptr, K::kValue,
       CTRUN_APPLY(c.log_dir = NoneIfEmpty(v); return Status::Ok();), "DIR",
       "Base directory for worker logs and error files (default: a new temporary directory).", G::kLogs},
      {"--redirects", {"-r", "--redirects"}, "PET_REDIRECTS", "0", K::kValue,
       CTRUN_APPLY(return ApplyStreams(v, c.redirects);),
       "STD", "Send worker streams to files only: 0 none, 1 stdout, 2 stderr, 3 both; or 0:1,1:2.", G::kLogs},
      {"--tee", {"-t", "--tee"}, "PET_TEE", "0", K::kValue,
       CTRUN_APPLY(return ApplyStreams(v, c.tee);),
       "STD", "Send worker streams to files and to the console, same format as --redirects.", G::kLogs},
      {"--local-ranks-filter", {"--local-ranks-filter", "--local_ranks_filter"}, "PET_LOCAL_RANKS_FILTER", "",
       K::kValue,
       CTRUN_APPLY(return ApplyLocalRanksFilter(v, c);),
       "RANKS", "Only these local ranks reach the console, e.g. 0,3 (files get every rank).", G::kLogs},
      {"--logs-specs", {"--logs-specs", "--logs_specs"}, "", nullptr, K::kValue,
       CTRUN_APPLY((void)v; (void)c;
                   return Bad("ctrun has no logs-specs plugins (leave --logs-specs unset; use --log-dir, "
                              "--redirects and --tee)");),
       "NAME", "torchrun logs-specs plugin; ctrun has none, so any name is an error.", G::kLogs},

      {"--no-agent-store", {"--no-agent-store", "--no_agent_store"}, "PET_NO_AGENT_STORE", "0", K::kSwitch,
       CTRUN_APPLY(return ApplySwitch(v, c.no_agent_store);), "",
       "Worker rank 0 hosts the c10d store instead of ctrun (TORCHELASTIC_USE_AGENT_STORE=False).",
       G::kCtrun},
      {"--events-file", {"--events-file", "--events_file"}, "PET_EVENTS_FILE", nullptr, K::kValue,
       CTRUN_APPLY(c.events_file = NoneIfEmpty(v); return Status::Ok();), "PATH",
       "Append one JSON line per agent event (round, worker start/exit, restart, signal) to PATH "
       "(also CTRUN_EVENTS_FILE).",
       G::kCtrun},
      {"--exit-code-from-root-cause", {"--exit-code-from-root-cause", "--exit_code_from_root_cause"},
       "PET_EXIT_CODE_FROM_ROOT_CAUSE", "0", K::kSwitch,
       CTRUN_APPLY(return ApplySwitch(v, c.exit_code_from_root_cause);), "",
       "On failure exit with the root-cause worker's own exit code instead of 1.", G::kCtrun},
      {"--exit-barrier-timeout", {"--exit-barrier-timeout", "--exit_barrier_timeout"},
       "PET_EXIT_BARRIER_TIMEOUT", "300", K::kValue,
       CTRUN_APPLY(auto s = PositiveSeconds(v, "300"); if (!s.ok()) return s.status();
                   c.exit_barrier_timeout = *s; return Status::Ok();),
       "SECONDS", "How long a finished node waits for the others before exiting.", G::kCtrun},
      {"--heartbeat-timeout", {"--heartbeat-timeout", "--heartbeat_timeout"}, "PET_HEARTBEAT_TIMEOUT", "0",
       K::kValue, CTRUN_APPLY(return ApplyTimeoutOrOff(v, c.heartbeat_timeout, "60");), "SECONDS",
       "Hang detection: kill and restart the worker group when a worker has not touched the file named "
       "by its CTRUN_HEARTBEAT_FILE for this long; 0 = off.",
       G::kCtrun},
      {"--heartbeat-initial-timeout", {"--heartbeat-initial-timeout", "--heartbeat_initial_timeout"},
       "PET_HEARTBEAT_INITIAL_TIMEOUT", nullptr, K::kValue,
       CTRUN_APPLY(auto s = PositiveSeconds(v, "600"); if (!s.ok()) return s.status();
                   c.heartbeat_initial_timeout = *s; return Status::Ok();),
       "SECONDS", "How long a worker may take to its first heartbeat (default: --heartbeat-timeout).",
       G::kCtrun},
      {"--version", {"--version"}, "", nullptr, K::kAction, nullptr, "", "Print the version and exit.",
       G::kCtrun},
      {"--help", {"-h", "--help"}, "", nullptr, K::kAction, nullptr, "", "Print this help and exit.", G::kCtrun},
  };
}

#undef CTRUN_APPLY

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string_view GroupTitle(HelpGroup g) {
  switch (g) {
    case HelpGroup::kSize: return "Worker/node size";
    case HelpGroup::kRendezvous: return "Rendezvous";
    case HelpGroup::kLaunch: return "User-code launch";
    case HelpGroup::kLogs: return "Logs";
    case HelpGroup::kCtrun: return "ctrun";
  }
  return "";
}

// Greedy word wrap of `text` to `width` columns, each line indented by `indent`.
std::string Wrap(std::string_view text, size_t indent, size_t width) {
  std::string out;
  size_t col = 0;
  for (std::string_view word : Split(text, ' ')) {
    if (word.empty()) continue;
    if (col == 0 || col + 1 + word.size() > width) {
      if (col != 0) out += '\n';
      out.append(indent, ' ');
      col = indent;
    } else {
      out += ' ';
      ++col;
    }
    out += word;
    col += word.size();
  }
  return out + '\n';
}

}  // namespace

const std::vector<FlagSpec>& Flags() {
  static const std::vector<FlagSpec> table = BuildTable();
  return table;
}

const FlagSpec* FindFlag(std::string_view spelling) {
  for (const FlagSpec& f : Flags()) {
    if (std::find(f.spellings.begin(), f.spellings.end(), spelling) != f.spellings.end()) return &f;
  }
  return nullptr;
}

std::string ClosestSpelling(std::string_view unknown) {
  std::string_view best;
  size_t best_distance = std::max<size_t>(3, unknown.size() / 3) + 1;
  for (const FlagSpec& f : Flags()) {
    for (std::string_view s : f.spellings) {
      size_t d = EditDistance(unknown, s);
      if (d < best_distance) {
        best = s;
        best_distance = d;
      }
    }
  }
  return std::string(best);
}

std::string HelpText() {
  std::string out =
      "usage: ctrun [OPTIONS] SCRIPT [SCRIPT_ARGS...]\n\n"
      "Start NPROC workers of SCRIPT on this node and supervise them (a torchrun replacement).\n"
      "Options must come before SCRIPT; everything after SCRIPT is passed to it unchanged.\n"
      "A value can be given as --flag VALUE or --flag=VALUE. Options marked [env X] take their\n"
      "default from the environment variable X (the flag wins); on/off options read X=1 or X=0.\n";
  for (HelpGroup g : {HelpGroup::kSize, HelpGroup::kRendezvous, HelpGroup::kLaunch, HelpGroup::kLogs,
                      HelpGroup::kCtrun}) {
    out += fmt::format("\n{}:\n", GroupTitle(g));
    for (const FlagSpec& f : Flags()) {
      if (f.group != g) continue;
      std::string line = "  ";
      for (size_t i = 0; i < f.spellings.size(); ++i) {
        line += fmt::format("{}{}", i ? ", " : "", f.spellings[i]);
      }
      if (!f.metavar.empty()) line += fmt::format(" {}", f.metavar);
      out += line + '\n';
      out += Wrap(f.help, 8, 80);
      std::string extra;
      if (!f.env.empty()) extra = fmt::format("env {}", f.env);
      if (f.default_text != nullptr && f.kind == FlagKind::kValue) {
        extra += fmt::format("{}default: {}", extra.empty() ? "" : ", ", *f.default_text ? f.default_text : "\"\"");
      }
      if (!extra.empty()) out += fmt::format("        [{}]\n", extra);
    }
  }
  out +=
      "\nEnvironment:\n"
      "  TORCH_ELASTIC_SHUTDOWN_TIMEOUT          seconds between the stop signal and SIGKILL [default: 30]\n"
      "  TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE   console line prefix, e.g. [${role_name}${local_rank}]:\n"
      "  PYTHON_EXEC                             python interpreter [default: first python3 on PATH]\n";
  return out;
}

std::string VersionText() { return fmt::format("ctrun {}\n", kVersion); }

Result<Endpoint> ParseEndpoint(std::string_view text, int default_port) {
  constexpr std::string_view kFix = "(use HOST[:PORT] or [IPV6]:PORT)";
  text = Trim(text);
  Endpoint e;
  std::string_view host = text;
  std::optional<std::string_view> port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return Bad(fmt::format("missing ']' after the IPv6 address {}", kFix));
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return Bad(fmt::format("unexpected text after ']' {}", kFix));
      port = rest.substr(1);
    }
  } else {
    size_t colon = text.find(':');
    if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) {
      return Bad(fmt::format("an IPv6 address needs brackets {}", kFix));
    }
    if (colon != std::string_view::npos) {
      host = text.substr(0, colon);
      port = text.substr(colon + 1);
    }
  }
  bool host_ok = !host.empty() && std::all_of(host.begin(), host.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_' || ch == ':' ||
           ch == '%';
  });
  if (!host_ok) return Bad(fmt::format("'{}' is not a host name or address {}", host, kFix));
  e.host = std::string(host);
  e.port = default_port;
  if (port) {
    auto n = ParseInt(*port);
    if (!n || *n < 1 || *n > 65535) return Bad(fmt::format("port must be an integer from 1 to 65535 {}", kFix));
    e.port = static_cast<int>(*n);
    e.port_given = true;
  }
  return e;
}

}  // namespace ctrun::launcher
