#include "launcher/cli/flag_values.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <csignal>
#include <utility>

#include <fmt/format.h>

#include "launcher/cli/text.h"

namespace ctrun::launcher {
namespace {

// A finite decimal number ("0.5", "30", "1e2").
std::optional<double> ParseNumber(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  std::optional<double> v = ParseDouble(s);
  if (!v || !std::isfinite(*v)) return std::nullopt;
  return v;
}

Status Bad(std::string msg) { return Status::InvalidArgument(std::move(msg)); }

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
      return Bad(fmt::format("'{}' is not a stream selection {}", QuotePart(item), kFix));
    }
    sel.per_rank[item[0] - '0'] = item[2] - '0';
  }
  return sel;
}

struct NamedSignal {
  std::string_view name;
  int number;
};

constexpr NamedSignal kSignals[] = {{"SIGTERM", SIGTERM}, {"SIGINT", SIGINT},   {"SIGHUP", SIGHUP},
                                    {"SIGQUIT", SIGQUIT}, {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}};

// Names are case-insensitive and the SIG prefix is optional ("usr1" = SIGUSR1);

constexpr std::string_view kRdzvConfKeys =
    "join_timeout, last_call_timeout, close_timeout, heartbeat_timeout, keep_alive_interval, "
    "keep_alive_max_attempt, read_timeout, timeout, is_host, store_type, use_libuv, token_file, rank, "
    "tls_cert, tls_key, tls_ca, tls_server_name, metrics_port";

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
  } else if (key == "metrics_port") {
    auto n = ParseInt(value);
    if (!n || *n < 0 || *n > 65535) return Bad("metrics_port: must be a port 0..65535 (0 picks a free one, e.g. 9400)");
    conf.metrics_port = static_cast<int>(*n);
  } else if (key == "rank") {
    auto n = ParseInt(value);
    if (!n || *n < 0) return Bad("rank: must be an integer >= 0 (e.g. 0)");
  } else {
    return Bad(fmt::format("unknown key '{}' (use only: {})", QuotePart(key), kRdzvConfKeys));
  }
  return Status::Ok();
}

}  // namespace

// Decimal integer, optional sign, nothing else (no spaces, no "1e3").
std::optional<long long> ParseInt(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  long long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

Result<Seconds> PositiveSeconds(std::string_view v, std::string_view example) {
  auto n = ParseNumber(Trim(v));
  if (!n || *n <= 0) return Bad(fmt::format("must be a number of seconds > 0 (e.g. {})", example));
  return Seconds(*n);
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
      return Bad(fmt::format("'{}' is not a local rank (use a comma list of integers >= 0, e.g. 0,3)", QuotePart(Trim(r))));
    }
    ranks.insert(static_cast<int>(*n));
  }
  c.local_ranks_filter = std::move(ranks);
  return Status::Ok();
}

Status ApplyPreemptSignal(std::string_view v, LaunchConfig& c) {
  LaunchConfig parsed;
  if (!ApplySignals(v, parsed).ok() || parsed.signals_to_handle.size() != 1) {
    return Bad("give one signal ctrun can catch: SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 or SIGUSR2 "
               "(SIG prefix and case optional)");
  }
  c.preempt_signal = parsed.signals_to_handle.front();
  return Status::Ok();
}

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
                             QuotePart(Trim(item))));
    }
    if (std::find(numbers.begin(), numbers.end(), it->number) == numbers.end()) {
      numbers.push_back(it->number);
    }
  }
  c.signals_to_handle = std::move(numbers);
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
      if (value.empty()) return Bad(fmt::format("key '{}' has no value (use {}=VALUE)", QuotePart(key), QuotePart(key)));
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

Status ApplyFtReplicas(std::string_view v, LaunchConfig& c) {
  constexpr std::string_view kFix = "(use MIN:MAX replica groups with 1 <= MIN <= MAX, e.g. 2:3)";
  std::vector<std::string_view> parts = Split(v, ':');
  std::optional<long long> lo = parts.size() == 2 ? ParseInt(parts[0]) : std::nullopt;
  std::optional<long long> hi = parts.size() == 2 ? ParseInt(parts[1]) : std::nullopt;
  if (!lo || !hi) return Bad(fmt::format("not a range of replica groups {}", kFix));
  if (*lo < 1 || *lo > *hi || *hi > 1024) return Bad(fmt::format("out of range {}; at most 1024 groups", kFix));
  c.ft = FtConfig{.min_replicas = static_cast<int>(*lo), .max_replicas = static_cast<int>(*hi)};
  return Status::Ok();
}

Status ApplyFtGroupSize(std::string_view v, int& out) {
  std::optional<long long> n = ParseInt(v);
  if (!n || *n < 1 || *n > kFtMaxGroupNodes) {
    return Bad(fmt::format("must be a node count from 1 to {} (e.g. 2)", kFtMaxGroupNodes));
  }
  out = static_cast<int>(*n);
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
    auto e = ParseEndpoint(v, 0, /*allow_port_zero=*/true);
    if (!e.ok()) return e.status();
  }
  c.rdzv_endpoint = std::string(Trim(v));
  return Status::Ok();
}

Status ApplyStragglerFactor(std::string_view v, double& out) {
  auto n = ParseNumber(Trim(v));
  if (!n || (*n != 0 && *n <= 1)) return Bad("must be a number > 1, or 0 to never flag (e.g. 1.5)");
  out = *n;
  return Status::Ok();
}

Status ApplyStragglerIntervals(std::string_view v, int& out) {
  auto n = ParseInt(Trim(v));
  if (!n || *n < 1 || *n > 1'000'000) return Bad("must be a whole number of reports >= 1 (e.g. 5)");
  out = static_cast<int>(*n);
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

std::optional<bool> ParseSwitchEnv(std::string_view v) {
  // Python's int(): whitespace around, one sign, digits with single '_'
  // between them; the value's size does not matter, only whether it is 0.
  v = Trim(v);
  if (!v.empty() && (v.front() == '+' || v.front() == '-')) v.remove_prefix(1);
  if (v.empty() || v.front() == '_' || v.back() == '_') return std::nullopt;
  bool nonzero = false;
  for (size_t i = 0; i < v.size(); ++i) {
    const char ch = v[i];
    if (ch == '_') {
      if (v[i - 1] == '_') return std::nullopt;
      continue;
    }
    if (ch < '0' || ch > '9') return std::nullopt;
    nonzero = nonzero || ch != '0';
  }
  return nonzero;
}

Status ApplyShutdownTimeout(std::string_view v, Seconds& out) {
  auto n = ParseInt(Trim(v));
  if (!n || *n < 0 || *n > 1'000'000'000) {
    return Bad("must be a whole number of seconds >= 0 (e.g. 60)");
  }
  out = Seconds(static_cast<double>(*n));
  return Status::Ok();
}

std::vector<std::string> ParseFilterList(std::string_view v) {
  std::vector<std::string> out(1);
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != ',') {
      out.back().push_back(v[i]);
    } else if (i + 1 < v.size() && v[i + 1] == ',') {
      out.back().push_back(',');  // ",," is one literal comma, pairs taken left to right
      ++i;
    } else {
      out.emplace_back();
    }
  }
  return out;
}

std::optional<std::string> NoneIfEmpty(std::string_view v) {
  if (v.empty()) return std::nullopt;
  return std::string(v);
}

Result<Endpoint> ParseEndpoint(std::string_view text, int default_port, bool allow_port_zero) {
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
  if (!host_ok) return Bad(fmt::format("'{}' is not a host name or address {}", QuotePart(host), kFix));
  e.host = std::string(host);
  e.port = default_port;
  if (port) {
    auto n = ParseInt(*port);
    const int lowest = allow_port_zero ? 0 : 1;
    if (!n || *n < lowest || *n > 65535) {
      return Bad(fmt::format("port must be an integer from {} to 65535 {}", lowest, kFix));
    }
    e.port = static_cast<int>(*n);
    e.port_given = true;
  }
  return e;
}

}  // namespace ctrun::launcher
