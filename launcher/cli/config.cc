#include "launcher/cli/config.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <exception>
#include <cmath>
#include <optional>
#include <random>
#include <utility>

#include <fmt/format.h>

#include "launcher/cli/flag_values.h"
#include "launcher/cli/flags.h"
#include "launcher/cli/help_text.h"
#include "launcher/cli/slurm_env.h"
#include "launcher/cli/text.h"

extern char** environ;

namespace ctrun::launcher {
namespace {

constexpr int kC10dDefaultPort = 29400;
constexpr int kEtcdDefaultPort = 2379;
constexpr double kDefaultShutdownGrace = 30;

// Where a setting's value came from: the spelling typed, the PET_* name, or
// "" for the table default.
struct Given {
  std::string value;
  std::string source;
};

// argparse's rule: "-1" and "-.5" are values, not flags.
bool LooksLikeNegativeNumber(std::string_view s) {
  if (s.size() < 2 || s[0] != '-') return false;
  s.remove_prefix(1);
  size_t dot = s.find('.');
  if (dot != std::string_view::npos) {
    if (s.find('.', dot + 1) != std::string_view::npos || dot + 1 == s.size()) return false;
  }
  for (char c : s) {
    if (c != '.' && (c < '0' || c > '9')) return false;
  }
  return true;
}

bool IsFlagToken(std::string_view s) {
  return s.size() >= 2 && s[0] == '-' && !LooksLikeNegativeNumber(s);
}

Status UsageError(std::string_view why) {
  return Status::InvalidArgument(fmt::format(
      "{} (usage: ctrun [OPTIONS] SCRIPT [SCRIPT_ARGS...]; see ctrun --help)", why));
}

uint64_t RandomSeed() {
  try {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  } catch (const std::exception&) {  // no entropy source: a clock-based id is still unique enough per job
    return static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  }
}

std::string RandomUuid4() {
  std::mt19937_64 gen(RandomSeed());
  uint64_t hi = gen();
  uint64_t lo = gen();
  hi = (hi & ~0xF000ULL) | 0x4000ULL;                   // version 4
  lo = (lo & ~(0xC000ULL << 48)) | (0x8000ULL << 48);   // RFC 4122 variant
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", hi >> 32, (hi >> 16) & 0xFFFF, hi & 0xFFFF,
                     lo >> 48, lo & 0xFFFFFFFFFFFFULL);
}

struct Tokens {
  std::map<const FlagSpec*, Given> explicit_values;
  const FlagSpec* action = nullptr;
  std::optional<std::string> script;
  std::vector<std::string> script_args;
};

// Splits argv into flags (last one wins, like argparse), the script and the
// untouched remainder.
Result<Tokens> Tokenize(const std::vector<std::string>& args) {
  Tokens t;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (!IsFlagToken(arg)) break;
    std::string name = arg;
    std::optional<std::string> inline_value;
    if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        name = arg.substr(0, eq);
        inline_value = arg.substr(eq + 1);
      }
    } else if (arg.size() > 2) {  // "-r3" or "-r=3"
      name = arg.substr(0, 2);
      inline_value = arg.substr(arg[2] == '=' ? 3 : 2);
    }
    Result<const FlagSpec*> resolved = ResolveFlag(name);
    if (!resolved.ok()) return resolved.status();
    const FlagSpec* flag = *resolved;
    if (flag->kind == FlagKind::kAction) {
      t.action = flag;
      return t;
    }
    if (flag->kind == FlagKind::kSwitch) {
      if (inline_value) {
        return Status::InvalidArgument(fmt::format("{} takes no value (write just {})", name, name));
      }
      t.explicit_values[flag] = {"1", name};
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= args.size() || IsFlagToken(args[i + 1])) {
        return Status::InvalidArgument(
            fmt::format("{} expects a value (write {} {} or {}={})", name, name, flag->metavar, name, flag->metavar));
      }
      inline_value = args[++i];
    }
    t.explicit_values[flag] = {*inline_value, name};
  }
  if (i < args.size()) {
    t.script = args[i];
    t.script_args.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  }
  return t;
}

// Each flag given on the command line or by its PET_* variable, by canonical
// name, with the value that wins.
std::map<std::string_view, std::string> UserValues(const Tokens& tokens, const Environment& env) {
  std::map<std::string_view, std::string> user;
  for (const FlagSpec& flag : Flags()) {
    if (auto it = tokens.explicit_values.find(&flag); it != tokens.explicit_values.end()) {
      user[flag.name] = it->second.value;
    } else if (auto e = flag.env.empty() ? env.end() : env.find(std::string(flag.env)); e != env.end()) {
      user[flag.name] = e->second;
    }
  }
  return user;
}

// Chooses flag > PET_* > Slurm (when `slurm` is set) > default for every row
// and applies it; records the sources by canonical name for the cross-flag
// checks.
Status ApplyTable(const Tokens& tokens, const Environment& env, const SlurmEnv* slurm, LaunchConfig& config,
                  std::map<std::string_view, Given>& sources) {
  const std::map<std::string_view, std::string> user = UserValues(tokens, env);
  for (const FlagSpec& flag : Flags()) {
    if (flag.kind == FlagKind::kAction) continue;
    Given given;
    auto explicit_it = tokens.explicit_values.find(&flag);
    auto env_it = flag.env.empty() ? env.end() : env.find(std::string(flag.env));
    if (explicit_it != tokens.explicit_values.end()) {
      given = explicit_it->second;
    } else if (env_it != env.end()) {
      given = {env_it->second, std::string(flag.env)};
      if (flag.kind == FlagKind::kSwitch) {
        // torchrun's check_env: bool(int(value)).
        std::optional<bool> on = ParseSwitchEnv(given.value);
        if (!on) {
          return Status::InvalidArgument(fmt::format(
              "{} '{}': must be an integer, 0 for off or any other for on (e.g. {}=1 turns {} on)",
              flag.env, Quote(given.value), flag.env, flag.name));
        }
        given.value = *on ? "1" : "0";
      }
    } else if (auto from_slurm = slurm ? slurm->DefaultFor(flag.name, config, user)
                                       : Result<std::optional<SlurmDefault>>(std::nullopt);
               !from_slurm.ok() || *from_slurm) {
      if (!from_slurm.ok()) return from_slurm.status();
      given = {(*from_slurm)->value, (*from_slurm)->source};
    } else if (flag.default_text != nullptr) {
      given = {flag.default_text, ""};
    } else {
      continue;
    }
    Status s = flag.apply(given.value, config);
    if (!s.ok()) {
      if (given.source.empty()) {
        return Status::Internal(fmt::format("default of {} is invalid: {}", flag.name, s.message()));
      }
      return Status::InvalidArgument(fmt::format("{} '{}': {}", given.source, Quote(given.value), s.message()));
    }
    sources[flag.name] = std::move(given);
  }
  return Status::Ok();
}

// torch's launcher: --shutdown-timeout (or PET_SHUTDOWN_TIMEOUT) wins, then
// TORCH_ELASTIC_SHUTDOWN_TIMEOUT, then 30 s. Unlike torch's int(), the
// variable may hold a fraction of a second.
Status ResolveShutdownGrace(const Environment& env, LaunchConfig& config) {
  if (config.shutdown_timeout_given) return Status::Ok();  // the table row set it
  auto it = env.find("TORCH_ELASTIC_SHUTDOWN_TIMEOUT");
  if (it == env.end()) {
    config.shutdown_grace = Seconds(kDefaultShutdownGrace);
    return Status::Ok();
  }
  const std::string& v = it->second;
  const double secs = ParseDouble(v).value_or(-1);
  if (!std::isfinite(secs) || secs < 0) {
    return Status::InvalidArgument(fmt::format(
        "TORCH_ELASTIC_SHUTDOWN_TIMEOUT '{}': must be a number of seconds >= 0 (e.g. 30)", Quote(v)));
  }
  config.shutdown_grace = Seconds(secs);
  return Status::Ok();
}

Status ReadOtherEnvironment(const Environment& env, LaunchConfig& config) {
  CTRUN_RETURN_IF_ERROR(ResolveShutdownGrace(env, config));
  if (auto it = env.find("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"); it != env.end()) {
    config.log_line_prefix_template = it->second;
  }
  // The issue's spelling; --events-file and PET_EVENTS_FILE win over it.
  if (auto it = env.find("CTRUN_EVENTS_FILE"); it != env.end() && !it->second.empty() && !config.events_file) {
    config.events_file = it->second;
  }
  // Slurm 23.02+ sets it in a job's environment: a preemption budget is at
  // most what is left of the job's time. Anything but a positive number is
  // ignored (an unlimited job has none).
  if (auto it = env.find("SLURM_JOB_END_TIME"); it != env.end()) {
    if (std::optional<long long> end = ParseInt(it->second); end && *end > 0) {
      config.slurm_job_end_unix_s = static_cast<double>(*end);
    }
  }
  if (auto it = env.find("CTRUN_PORT_SNIFF_DEADLINE_MS"); it != env.end()) {
    if (std::optional<long long> ms = ParseInt(it->second); ms && *ms > 0) {
      config.port_sniff_deadline = std::chrono::milliseconds(*ms);
    }
  }
  // Like CTRUN_EVENTS_FILE: --health-check and PET_HEALTH_CHECK win over it.
  if (auto it = env.find("CTRUN_HEALTH_CHECK"); it != env.end() && !it->second.empty() && !config.health_check) {
    config.health_check = it->second;
  }
  if (auto it = env.find("CTRUN_DEDUP_WINDOW_MS"); it != env.end()) {
    if (std::optional<long long> ms = ParseInt(it->second); ms && *ms > 0) {
      config.dedup_window = std::chrono::milliseconds(*ms);
    }
  }
  return Status::Ok();
}

std::string Describe(const Given& g, std::string_view flag) {
  return g.source.empty() ? fmt::format("{} (default '{}')", flag, g.value)
                          : fmt::format("{} '{}'", g.source, Quote(g.value));
}

Status ResolveRendezvous(std::map<std::string_view, Given>& sources, LaunchConfig& config,
                         std::vector<std::string>& warnings) {
  if (config.standalone) {
    config.rdzv_backend = RdzvBackend::kC10d;
    config.rdzv_endpoint = "localhost:0";
    config.rdzv_id = RandomUuid4();
    config.rdzv_host = "localhost";
    config.rdzv_port = 0;
    for (std::string_view name : {"--rdzv-backend", "--rdzv-endpoint", "--rdzv-id"}) {
      const Given& g = sources[name];
      if (!g.source.empty()) {
        warnings.push_back(fmt::format("--standalone ignores {} '{}'; using --rdzv-backend c10d "
                                       "--rdzv-endpoint localhost:0 --rdzv-id {}",
                                       g.source, Quote(g.value), config.rdzv_id));
      }
    }
    return Status::Ok();
  }
  const Given& endpoint = sources["--rdzv-endpoint"];
  if (config.rdzv_backend == RdzvBackend::kStatic) {
    if (config.rdzv_endpoint.empty()) {
      config.rdzv_host = config.master_addr;
      config.rdzv_port = config.master_port;
      return Status::Ok();
    }
    auto e = ParseEndpoint(config.rdzv_endpoint, 0, /*allow_port_zero=*/true);
    if (!e.ok()) return Status::Internal(e.status().message());  // already checked by the table
    if (!e->port_given) {
      return Status::InvalidArgument(fmt::format(
          "{} '{}': the static backend needs a port (use HOST:PORT, or leave it unset and give "
          "--master-addr and --master-port)",
          endpoint.source, Quote(endpoint.value)));
    }
    config.rdzv_host = e->host;
    config.rdzv_port = e->port;
    return Status::Ok();
  }
  int default_port = config.rdzv_backend == RdzvBackend::kC10d ? kC10dDefaultPort : kEtcdDefaultPort;
  if (config.rdzv_endpoint.empty()) {
    config.rdzv_host = "localhost";
    config.rdzv_port = default_port;
    return Status::Ok();
  }
  auto e = ParseEndpoint(config.rdzv_endpoint, default_port, /*allow_port_zero=*/true);
  if (!e.ok()) return Status::Internal(e.status().message());
  config.rdzv_host = e->host;
  config.rdzv_port = e->port;
  return Status::Ok();
}

// --ft-replicas: the endpoint serves the quorum, and each replica group (a
// node, or --ft-group-size nodes: group R is the nodes of --node-rank
// R*size..R*size+size-1) has a rendezvous of its own, of exactly its nodes
// (a node count Slurm gives is the job's, not a group's).
Status CheckFaultTolerance(std::map<std::string_view, Given>& sources, LaunchConfig& config) {
  const std::string& from = sources["--ft-replicas"].source;
  if (config.rdzv_backend != RdzvBackend::kC10d || !config.rdzv_endpoint_given) {
    return Status::InvalidArgument(fmt::format(
        "{} needs a quorum server: give --rdzv-backend c10d --rdzv-endpoint HOST:PORT (ctrund at HOST:PORT, "
        "or the node whose address HOST is hosts it)",
        from));
  }
  const int size = config.ft_group_size;
  const Given& nnodes = sources["--nnodes"];
  const bool job_count = nnodes.source.rfind("SLURM_", 0) == 0 || nnodes.source.empty();
  if (!job_count && (config.min_nodes != size || config.max_nodes != size)) {
    return Status::InvalidArgument(fmt::format(
        "{} with {}: under --ft-replicas each replica group has a rendezvous of its own, so --nnodes counts "
        "one group's nodes (give --nnodes {} or drop it; --ft-replicas counts the groups, --ft-group-size "
        "their nodes)",
        Describe(nnodes, "--nnodes"), from, size));
  }
  config.min_nodes = config.max_nodes = size;
  config.ft->group_size = size;
  if (size > 1) {
    const Given& rank = sources["--node-rank"];
    if (rank.source.empty()) {
      return Status::InvalidArgument(fmt::format(
          "--ft-group-size {} needs this node's --node-rank (or PET_NODE_RANK, SLURM_NODEID): the nodes of "
          "node rank R*{}..R*{}+{} form replica group R",
          size, size, size, size - 1));
    }
    config.ft->group_index = config.node_rank / size;
    // Every group rendezvous on the endpoint under a run id of its own, which
    // ctrund serves; an agent's server serves its own run only.
    if (config.rdzv_conf.is_host.value_or(false)) {
      return Status::InvalidArgument(fmt::format(
          "--ft-group-size {} with --rdzv-conf is_host=1: the replica groups' rendezvous and the quorum are "
          "served by ctrund at --rdzv-endpoint, not by an agent; drop is_host=1 and run ctrund there",
          size));
    }
    config.rdzv_conf.is_host = false;
  }
  config.node_rank = 0;  // the group's rendezvous assigns its nodes' ranks
  sources["--node-rank"] = Given{};
  return Status::Ok();
}

Status CheckCombinations(std::map<std::string_view, Given>& sources, LaunchConfig& config) {
  if (config.ft) CTRUN_RETURN_IF_ERROR(CheckFaultTolerance(sources, config));
  if (!config.ft && config.ft_group_size != 1) {
    return Status::InvalidArgument(fmt::format(
        "{}: replica groups are for --ft-replicas (give --ft-replicas MIN:MAX too, or drop it)",
        Describe(sources["--ft-group-size"], "--ft-group-size")));
  }
  if (!config.ft && config.ft_exact) {
    return Status::InvalidArgument(fmt::format(
        "{}: exact results are for fault-tolerant training (give --ft-replicas MIN:MAX too, or drop it)",
        sources["--ft-exact"].source.empty() ? "--ft-exact" : sources["--ft-exact"].source));
  }
  if (config.node_rank >= config.max_nodes) {
    return Status::InvalidArgument(fmt::format(
        "{}: must be less than the maximum node count {} from {} (use 0..{}, or raise --nnodes)",
        Describe(sources["--node-rank"], "--node-rank"), config.max_nodes,
        Describe(sources["--nnodes"], "--nnodes"), config.max_nodes - 1));
  }
  if (config.preempt_signal != 0) {
    if (!config.preempt_grace) {
      return Status::InvalidArgument(fmt::format(
          "{} needs --preempt-grace SECONDS: the time the workers get to save (e.g. --preempt-grace 120)",
          Describe(sources["--preempt-signal"], "--preempt-signal")));
    }
    // ctrun must catch it (the default action of SIGUSR1 ends the process).
    std::vector<int>& handled = config.signals_to_handle;
    if (std::find(handled.begin(), handled.end(), config.preempt_signal) == handled.end()) {
      handled.push_back(config.preempt_signal);
    }
  }
  if (config.no_python && config.module && !config.run_path) {
    return Status::InvalidArgument(fmt::format(
        "{} and {} cannot be used together (drop one: --no-python runs SCRIPT directly, -m runs a python module)",
        sources["--no-python"].source, sources["--module"].source));
  }
  if (config.run_path && (config.script.empty() || config.script.front() != '/')) {
    return Status::InvalidArgument(fmt::format(
        "{}: script '{}' must be an absolute path (e.g. /home/me/train.py)", sources["--run-path"].source,
        Quote(config.script)));
  }
  return Status::Ok();
}

}  // namespace

Environment CurrentEnvironment() {
  Environment env;
  for (char** p = environ; p != nullptr && *p != nullptr; ++p) {
    std::string_view entry(*p);
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return env;
}

Result<ParsedArgs> ParseCommandLine(const std::vector<std::string>& args, const Environment& env) {
  auto tokens = Tokenize(args);
  if (!tokens.ok()) return tokens.status();
  ParsedArgs out;
  if (tokens->action != nullptr) {
    bool help = tokens->action->name == "--help";
    out.action = help ? ParseAction::kHelp : ParseAction::kVersion;
    out.text = help ? HelpText() : VersionText();
    return out;
  }
  if (!tokens->script) return UsageError("missing the training script");

  LaunchConfig& config = out.config;
  config.script = *tokens->script;
  config.script_args = tokens->script_args;
  std::map<std::string_view, Given> sources;
  std::optional<SlurmEnv> slurm = SlurmEnv::Detect(env, SystemNodeAddressResolver());
  CTRUN_RETURN_IF_ERROR(ApplyTable(*tokens, env, slurm ? &*slurm : nullptr, config, sources));
  config.master_port_given = !sources["--master-port"].source.empty();
  CTRUN_RETURN_IF_ERROR(ReadOtherEnvironment(env, config));
  CTRUN_RETURN_IF_ERROR(ResolveRendezvous(sources, config, out.warnings));
  {
    const std::string& from = sources["--rdzv-endpoint"].source;
    config.rdzv_endpoint_given = !config.standalone && !config.rdzv_endpoint.empty() &&
                                 (from.rfind("--", 0) == 0 || from.rfind("PET_", 0) == 0);
  }
  CTRUN_RETURN_IF_ERROR(CheckCombinations(sources, config));
  config.node_rank_given = !sources["--node-rank"].source.empty();  // after --ft-replicas set it aside
  // Slurm's node 0 is the first host of the node list: it hosts the
  // rendezvous, so no agent has to guess from its own addresses.
  if (sources["--rdzv-endpoint"].source.rfind("SLURM_", 0) == 0 &&
      sources["--node-rank"].source == "SLURM_NODEID" && !config.rdzv_conf.is_host) {
    config.rdzv_conf.is_host = config.node_rank == 0;
  }
  return out;
}

}  // namespace ctrun::launcher
