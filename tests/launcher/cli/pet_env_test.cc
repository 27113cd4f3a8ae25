// Every flag of the table in its PET_* form (Kubeflow's PyTorchJob/TrainJob
// set these) gives the same LaunchConfig as the flag. The test walks
// Flags() itself: a new row needs a sample value below, or the test fails.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "launcher/cli/config.h"
#include "launcher/cli/flags.h"

namespace ctrun::launcher {
namespace {

// A non-default value per flag, and flags both forms need beside it (the
// same on both sides). Switches have no value: the flag is on, PET_*=1.
struct Sample {
  std::string value;
  std::vector<std::string> context;
};

const std::map<std::string_view, Sample>& Samples() {
  static const std::map<std::string_view, Sample> samples = {
      {"--nnodes", {"2:4", {}}},
      {"--nproc-per-node", {"3", {}}},
      {"--rdzv-backend", {"c10d", {}}},
      {"--rdzv-endpoint", {"node9:1234", {}}},
      {"--rdzv-id", {"job7", {}}},
      {"--rdzv-conf", {"join_timeout=7,is_host=1,store_type=file", {}}},
      {"--standalone", {"", {}}},
      {"--node-rank", {"1", {"--nnodes", "2"}}},
      {"--master-addr", {"10.2.3.4", {}}},
      {"--master-port", {"1234", {}}},
      {"--local-addr", {"10.9.8.7", {}}},
      {"--max-restarts", {"3", {}}},
      {"--monitor-interval", {"0.5", {}}},
      {"--start-method", {"fork", {}}},
      {"--event-log-handler", {"console", {}}},
      {"--role", {"trainer", {}}},
      {"--module", {"", {}}},
      {"--no-python", {"", {}}},
      {"--run-path", {"", {}}},
      {"--signals-to-handle", {"USR1,term", {}}},
      {"--log-dir", {"/var/log/ctrun", {}}},
      {"--redirects", {"3", {}}},
      {"--tee", {"0:1,1:2", {}}},
      {"--local-ranks-filter", {"0,3", {}}},
      {"--exit-code-from-root-cause", {"", {}}},
      {"--exit-barrier-timeout", {"42", {}}},
      {"--heartbeat-timeout", {"60", {}}},
      {"--restart-backoff", {"5", {}}},
      {"--min-healthy-uptime", {"120", {}}},
      {"--fail-fast-on-startup", {"", {}}},
      {"--restart-on-any-failure", {"", {}}},
      {"--kill-on-bad-exit", {"0", {}}},
      {"--kill-timeout", {"10", {}}},
      {"--preempt-grace", {"45", {}}},
      {"--preempt-signal", {"usr2", {"--preempt-grace", "9"}}},
      {"--hang-stacks-timeout", {"5", {}}},
      {"--health-check", {"/usr/share/ctrun/health-check.sh", {}}},
      {"--health-check-timeout", {"7", {}}},
      {"--health-check-interval", {"30", {}}},
      {"--max-unhealthy-nodes", {"2", {}}},
      {"--straggler-factor", {"2.5", {}}},
      {"--straggler-intervals", {"7", {}}},
      {"--ft-replicas", {"2:3", {"--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1"}}},
      {"--ft-join-timeout", {"9", {}}},
      {"--ft-exact", {"", {"--ft-replicas", "2:3", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1"}}},
      {"--ft-group-size",
       {"2", {"--ft-replicas", "2:3", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1", "--node-rank", "5"}}},
      {"--heartbeat-initial-timeout", {"600", {}}},
      {"--dedup-logs", {"", {}}},
      {"--share-logs", {"", {}}},
      {"--no-agent-store", {"", {}}},
      {"--events-file", {"/var/log/ctrun/events.jsonl", {}}},
      {"--shutdown-timeout", {"90", {}}},
      {"--virtual-local-rank", {"", {}}},
      {"--duplicate-stdout-filters", {"loss,,x,acc", {}}},
      {"--duplicate-stderr-filters", {"WARN", {}}},
      {"--numa-binding", {"socket", {}}},
  };
  return samples;
}

// Rows torchrun itself gives no PET_* form (ctrun adds PET_NUMA_BINDING).
const std::set<std::string_view> kNoEnv = {"--logs-specs", "--version", "--help"};

std::string PetStreams(const StreamSelection& s) {
  std::string out = std::to_string(s.all);
  for (const auto& [rank, v] : s.per_rank) out += fmt::format(" {}:{}", rank, v);
  return out;
}

template <typename T>
std::string PetOpt(const std::optional<T>& v) {
  return v ? fmt::format("{}", *v) : "unset";
}

// Every LaunchConfig field a flag can set, one per line.
std::string PetDump(const LaunchConfig& c) {
  const RdzvConf& r = c.rdzv_conf;
  std::string given, signals, filter = "unset";
  for (const auto& [k, v] : r.given) given += k + "=" + v + ";";
  for (int s : c.signals_to_handle) signals += fmt::format("{},", s);
  if (c.local_ranks_filter) {
    filter.clear();
    for (int rank : *c.local_ranks_filter) filter += fmt::format("{},", rank);
  }
  std::string out = fmt::format(
      "nodes={}:{} nproc={}/{} backend={} endpoint={} host={}:{} id={}\n"
      "conf=join:{} last:{} close:{} hb:{} ka:{}x{} read:{} timeout:{} is_host:{} store:{} libuv:{} token:{} "
      "given:{}\n",
      c.min_nodes, c.max_nodes, static_cast<int>(c.nproc_kind), c.nproc_per_node,
      static_cast<int>(c.rdzv_backend), c.rdzv_endpoint, c.rdzv_host, c.rdzv_port,
      c.standalone ? "<random>" : c.rdzv_id, r.join_timeout.count(), r.last_call_timeout.count(),
      r.close_timeout.count(), r.heartbeat_timeout.count(), r.keep_alive_interval.count(),
      r.keep_alive_max_attempt, r.read_timeout.count(), r.timeout.count(), PetOpt(r.is_host), r.store_type,
      r.use_libuv, PetOpt(r.token_file), given);
  out += fmt::format(
      "standalone={} node_rank={}/{} master={}:{}/{} local_addr={} restarts={} monitor={} start={} signals={} "
      "grace={} barrier={} root_cause={} heartbeat={}/{}\n",
      c.standalone, c.node_rank, c.node_rank_given, c.master_addr, c.master_port, c.master_port_given,
      PetOpt(c.local_addr), c.max_restarts, c.monitor_interval.count(), c.start_method, signals,
      c.shutdown_grace.count(), c.exit_barrier_timeout.count(), c.exit_code_from_root_cause,
      c.heartbeat_timeout.count(), c.heartbeat_initial_timeout ? c.heartbeat_initial_timeout->count() : -1.0);
  out += fmt::format(
      "role={} module={} no_python={} run_path={} script={} log_dir={} redirects={} tee={} filter={} "
      "logs_specs={} numa={} events={} prefix={} no_agent_store={} events_file={} dedup_logs={} share_logs={}\n",
      c.role, c.module, c.no_python, c.run_path, c.script, PetOpt(c.log_dir), PetStreams(c.redirects),
      PetStreams(c.tee), filter, PetOpt(c.logs_specs), PetOpt(c.numa_binding), PetOpt(c.event_log_handler),
      c.log_line_prefix_template, c.no_agent_store, PetOpt(c.events_file), c.dedup_logs, c.share_logs);
  out += fmt::format("backoff={} healthy={} fail_fast={} kill_timeout={} hang_stacks={} any_failure={} "
                     "kill_on_bad_exit={}\n",
                     c.restart_backoff.count(), c.min_healthy_uptime.count(), c.fail_fast_on_startup,
                     c.kill_timeout.count(), c.hang_stacks_timeout.count(), c.restart_on_any_failure,
                     c.kill_on_bad_exit);
  out += fmt::format("preempt_grace={} preempt_signal={}\n", c.preempt_grace ? c.preempt_grace->count() : -1.0,
                     c.preempt_signal);
  out += fmt::format("health_check={} timeout={} interval={} max_unhealthy={}\n", PetOpt(c.health_check),
                     c.health_check_timeout.count(), c.health_check_interval.count(),
                     c.max_unhealthy_nodes ? *c.max_unhealthy_nodes : -1);
  out += fmt::format("straggler_factor={} straggler_intervals={}\n", c.straggler_factor, c.straggler_intervals);
  out += fmt::format("ft={} ft_join_timeout={} ft_group_size={}\n",
                     c.ft ? fmt::format("{}:{} group {} of {}", c.ft->min_replicas, c.ft->max_replicas,
                                        c.ft->group_index, c.ft->group_size)
                          : "off",
                     c.ft_join_timeout.count(), c.ft_group_size);
  out += fmt::format("virtual_local_rank={} shutdown_given={} dup_out=[{}] dup_err=[{}]\n", c.virtual_local_rank,
                     c.shutdown_timeout_given, fmt::join(c.duplicate_stdout_filters, "|"),
                     fmt::join(c.duplicate_stderr_filters, "|"));
  return out;
}

constexpr const char* kScript = "/abs/train.py";  // absolute, for --run-path

std::string ParseDump(std::vector<std::string> args, const Environment& env) {
  args.push_back(kScript);
  auto r = ParseCommandLine(args, env);
  INFO(fmt::format("{} with {} PET_* variables", fmt::join(args, " "), env.size()));
  REQUIRE(r.ok());
  return PetDump(r->config);
}

std::vector<std::string> FlagForm(const FlagSpec& flag, const Sample& s) {
  std::vector<std::string> args = s.context;
  args.push_back(std::string(flag.name));
  if (flag.kind == FlagKind::kValue) args.push_back(s.value);
  return args;
}

TEST_CASE("every flag row is covered: a sample value, or listed as having no PET_* form") {
  for (const FlagSpec& flag : Flags()) {
    INFO(flag.name);
    if (flag.env.empty()) {
      CHECK(kNoEnv.count(flag.name) == 1);
    } else {
      CHECK(Samples().count(flag.name) == 1);
      CHECK(flag.env == "PET_" + [&] {
              std::string upper(flag.name.substr(2));
              for (char& ch : upper) ch = ch == '-' ? '_' : static_cast<char>(std::toupper(ch));
              return upper;
            }());
    }
  }
}

TEST_CASE("each PET_* variable gives the same config as its flag, and changes it") {
  const std::string defaults = ParseDump({}, {});
  for (const FlagSpec& flag : Flags()) {
    auto sample = Samples().find(flag.name);
    if (flag.env.empty() || sample == Samples().end()) continue;
    const Sample& s = sample->second;
    INFO(fmt::format("{} / {}={}", flag.name, flag.env, s.value));
    const std::string pet_value = flag.kind == FlagKind::kSwitch ? "1" : s.value;
    const std::string by_flag = ParseDump(FlagForm(flag, s), {});
    const std::string by_env = ParseDump(s.context, {{std::string(flag.env), pet_value}});
    CHECK(by_env == by_flag);
    CHECK(by_flag != defaults);
  }
}

TEST_CASE("the flag wins over its PET_* variable, which is then not even checked") {
  for (const FlagSpec& flag : Flags()) {
    auto sample = Samples().find(flag.name);
    if (flag.env.empty() || sample == Samples().end()) continue;
    const Sample& s = sample->second;
    INFO(flag.name);
    const std::string pet_value = flag.kind == FlagKind::kSwitch ? "0" : "bogus:value:!";
    CHECK(ParseDump(FlagForm(flag, s), {{std::string(flag.env), pet_value}}) == ParseDump(FlagForm(flag, s), {}));
  }
}

TEST_CASE("all PET_* variables at once equal all flags at once") {
  Environment env;
  std::vector<std::string> args;
  for (const FlagSpec& flag : Flags()) {
    auto sample = Samples().find(flag.name);
    // --standalone replaces the rendezvous settings, -m conflicts with --no-python and --ft-replicas with
    // --nnodes 2:4 (--ft-exact needs it): test them alone (above).
    if (flag.env.empty() || sample == Samples().end() || flag.name == "--standalone" || flag.name == "--module" ||
        flag.name == "--ft-replicas" || flag.name == "--ft-group-size" || flag.name == "--ft-exact") {
      continue;
    }
    const Sample& s = sample->second;
    env[std::string(flag.env)] = flag.kind == FlagKind::kSwitch ? "1" : s.value;
    std::vector<std::string> form = FlagForm(flag, {s.value, {}});
    args.insert(args.end(), form.begin(), form.end());
  }
  CHECK(ParseDump({}, env) == ParseDump(args, {}));
}

TEST_CASE("a bad PET_* value is an error naming the variable") {
  for (const FlagSpec& flag : Flags()) {
    if (flag.env.empty()) continue;
    auto r = ParseCommandLine({kScript}, {{std::string(flag.env), "bogus:value:!"}});
    INFO(flag.name);
    // Free-form values (ids, addresses, names, paths) accept anything non-empty.
    if (r.ok()) continue;
    CHECK(r.status().IsInvalidArgument());
    CHECK_THAT(r.status().message(), Catch::StartsWith(fmt::format("{} 'bogus:value:!': ", flag.env)));
  }
}

}  // namespace
}  // namespace ctrun::launcher
