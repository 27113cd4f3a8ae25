#include "launcher/cli/flags.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "launcher/cli/flag_values.h"
#include "launcher/cli/identifier.h"
#include "launcher/cli/text.h"

namespace ctrun::launcher {
namespace {

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
       CTRUN_APPLY(CTRUN_RETURN_IF_ERROR(CheckRunId(v)); c.rdzv_id = std::string(v); return Status::Ok();),
       "ID", "User-defined job id (UTF-8, at most 128 bytes); jobs sharing an endpoint are kept apart by it.",
       G::kRendezvous},
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
       CTRUN_APPLY(if (v.empty()) {
                     return Status::InvalidArgument("address must not be empty (e.g. --master-addr 10.0.0.1)");
                   }
                   c.master_addr = std::string(v); return Status::Ok();),
       "ADDR", "Address of the node-rank-0 node (static backend with no --rdzv-endpoint).", G::kRendezvous},
      {"--master-port", {"--master-port", "--master_port"}, "PET_MASTER_PORT", "29500", K::kValue,
       CTRUN_APPLY(auto n = ParseInt(v);
                   if (!n || *n < 1 || *n > 65535) {
                     return Status::InvalidArgument("port must be an integer from 1 to 65535");
                   }
                   c.master_port = static_cast<int>(*n); return Status::Ok();),
       "PORT", "Port on the master node (static backend with no --rdzv-endpoint).", G::kRendezvous},
      {"--local-addr", {"--local-addr", "--local_addr"}, "PET_LOCAL_ADDR", nullptr, K::kValue,
       CTRUN_APPLY(CTRUN_RETURN_IF_ERROR(CheckNodeName(v));
                   c.local_addr = NoneIfEmpty(v); return Status::Ok();), "ADDR",
       "Address this node advertises to the others (default: its FQDN).", G::kRendezvous},

      {"--max-restarts", {"--max-restarts", "--max_restarts"}, "PET_MAX_RESTARTS", "0", K::kValue,
       CTRUN_APPLY(return ApplyNonNegativeInt(v, c.max_restarts, "3");), "N",
       "Worker group restarts allowed after failures before the job fails.", G::kLaunch},
      {"--monitor-interval", {"--monitor-interval", "--monitor_interval"}, "PET_MONITOR_INTERVAL", "0.1",
       K::kValue,
       CTRUN_APPLY(auto s = PositiveSeconds(v, "0.1"); if (!s.ok()) return s.status();
                   c.monitor_interval = *s; return Status::Ok();),
       "SECONDS",
       "How often torchrun polls its workers; ctrun sees each exit at once, never later than this.",
       G::kLaunch},
      {"--start-method", {"--start-method", "--start_method"}, "PET_START_METHOD", "spawn", K::kValue,
       CTRUN_APPLY(return ApplyChoice(v, {"spawn", "fork", "forkserver"}, c.start_method);), "METHOD",
       "spawn, fork or forkserver: torchrun's start method, used only by --run-path; ctrun always forks and "
       "execs each worker.",
       G::kLaunch},
      {"--event-log-handler", {"--event-log-handler", "--event_log_handler"}, "PET_EVENT_LOG_HANDLER", "null",
       K::kValue, CTRUN_APPLY(std::string s; CTRUN_RETURN_IF_ERROR(
                                  ApplyChoice(v, {"null", "console", "dynamic_rendezvous"}, s));
                              c.event_log_handler = s; return Status::Ok();),
       "NAME",
       "torchrun's event handler: console also prints each agent event to stderr as one JSON line; null "
       "(and dynamic_rendezvous) print nothing.",
       G::kLaunch},
      {"--role", {"--role"}, "PET_ROLE", "default", K::kValue,
       CTRUN_APPLY(if (v.empty()) return Status::InvalidArgument("role must not be empty (e.g. --role trainer)");
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
      {"--shutdown-timeout", {"--shutdown-timeout", "--shutdown_timeout"}, "PET_SHUTDOWN_TIMEOUT", nullptr,
       K::kValue,
       CTRUN_APPLY(CTRUN_RETURN_IF_ERROR(ApplyShutdownTimeout(v, c.shutdown_grace));
                   c.shutdown_timeout_given = true; return Status::Ok();),
       "SECONDS",
       "Seconds between the stop signal to the workers and SIGKILL (default: "
       "TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30).",
       G::kLaunch},
      {"--virtual-local-rank", {"--virtual-local-rank", "--virtual_local_rank"}, "PET_VIRTUAL_LOCAL_RANK", "0",
       K::kSwitch, CTRUN_APPLY(return ApplySwitch(v, c.virtual_local_rank);), "",
       "Every worker gets LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES narrowed to its own GPU.", G::kLaunch},
      {"--numa-binding", {"--numa-binding", "--numa_binding"}, "PET_NUMA_BINDING", nullptr, K::kValue,
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
      {"--duplicate-stdout-filters", {"--duplicate-stdout-filters", "--duplicate_stdout_filters"},
       "PET_DUPLICATE_STDOUT_FILTERS", nullptr, K::kValue,
       CTRUN_APPLY(c.duplicate_stdout_filters = ParseFilterList(v); return Status::Ok();), "TEXT,...",
       "Also write every worker stdout line that contains any of these texts to filtered_stdout.log in the "
       "attempt's log directory (',,' is a literal comma).",
       G::kLogs},
      {"--duplicate-stderr-filters", {"--duplicate-stderr-filters", "--duplicate_stderr_filters"},
       "PET_DUPLICATE_STDERR_FILTERS", nullptr, K::kValue,
       CTRUN_APPLY(c.duplicate_stderr_filters = ParseFilterList(v); return Status::Ok();), "TEXT,...",
       "The same for stderr, into filtered_stderr.log.", G::kLogs},
      {"--logs-specs", {"--logs-specs", "--logs_specs"}, "", nullptr, K::kValue,
       CTRUN_APPLY((void)v; (void)c;
                   return Status::InvalidArgument(
                       "ctrun has no logs-specs plugins (leave --logs-specs unset; ctrun's logs are set with "
                       "--log-dir, --redirects, --tee, --local-ranks-filter and --duplicate-stdout-filters / "
                       "--duplicate-stderr-filters)");),
       "NAME", "torchrun logs-specs plugin; ctrun has none, so any name is an error.", G::kLogs},

      {"--dedup-logs", {"--dedup-logs", "--dedup_logs"}, "PET_DEDUP_LOGS", "0", K::kSwitch,
       CTRUN_APPLY(return ApplySwitch(v, c.dedup_logs);), "",
       "On the console, print a line that several local ranks print within 100 ms once, as "
       "\"[ranks 0-7]: line\" (log files stay per rank).",
       G::kLogs},
      {"--share-logs", {"--share-logs", "--share_logs"}, "PET_SHARE_LOGS", "0", K::kSwitch,
       CTRUN_APPLY(return ApplySwitch(v, c.share_logs);), "",
       "Also send every worker output line to the rendezvous server (c10d or ctrund, with its token and TLS), "
       "where `ctrun logs` shows every node's lines; off, no line leaves this node.",
       G::kLogs},
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
      {"--straggler-factor", {"--straggler-factor", "--straggler_factor"}, "PET_STRAGGLER_FACTOR", "1.5",
       K::kValue, CTRUN_APPLY(return ApplyStragglerFactor(v, c.straggler_factor);), "K",
       "With --heartbeat-timeout: flag a rank whose step time is above K x the job median as a straggler "
       "(event, metric, ctrun status); K > 1, or 0 = never.",
       G::kCtrun},
      {"--straggler-intervals", {"--straggler-intervals", "--straggler_intervals"}, "PET_STRAGGLER_INTERVALS",
       "5", K::kValue, CTRUN_APPLY(return ApplyStragglerIntervals(v, c.straggler_intervals);), "M",
       "How many keep-alive reports in a row a rank must be slow before it is flagged a straggler.",
       G::kCtrun},
      {"--restart-backoff", {"--restart-backoff", "--restart_backoff"}, "PET_RESTART_BACKOFF", "0", K::kValue,
       CTRUN_APPLY(return ApplyTimeoutOrOff(v, c.restart_backoff, "10");), "SECONDS",
       "Crash-loop backoff: wait SECONDS before the first restart after a worker failure, twice as long "
       "before each next one (up to 32x), back to SECONDS after a run of --min-healthy-uptime; 0 = off.",
       G::kCtrun},
      {"--min-healthy-uptime", {"--min-healthy-uptime", "--min_healthy_uptime"}, "PET_MIN_HEALTHY_UPTIME",
       "60", K::kValue,
       CTRUN_APPLY(auto s = PositiveSeconds(v, "60"); if (!s.ok()) return s.status();
                   c.min_healthy_uptime = *s; return Status::Ok();),
       "SECONDS",
       "A run this long is healthy: it resets --restart-backoff and, without --heartbeat-timeout, counts "
       "as progress for --fail-fast-on-startup.",
       G::kCtrun},
      {"--fail-fast-on-startup", {"--fail-fast-on-startup", "--fail_fast_on_startup"},
       "PET_FAIL_FAST_ON_STARTUP", "0", K::kSwitch,
       CTRUN_APPLY(return ApplySwitch(v, c.fail_fast_on_startup);), "",
       "When the first attempt's workers fail before any progress (no heartbeat touch, or under "
       "--min-healthy-uptime), stop at once with exit code 3 (do not requeue) instead of restarting.",
       G::kCtrun},
      {"--restart-on-any-failure", {"--restart-on-any-failure", "--restart_on_any_failure"},
       "PET_RESTART_ON_ANY_FAILURE", "0", K::kSwitch,
       CTRUN_APPLY(return ApplySwitch(v, c.restart_on_any_failure);), "",
       "Restart even a failure no restart can fix, as torchrun does: every rank failing within 1 s of its "
       "start with the same error, or one rank failing twice in a row with the same error at the same step. "
       "Off, such a failure ends the job at once with exit code 3 (do not requeue).",
       G::kCtrun},
      {"--kill-on-bad-exit", {"--kill-on-bad-exit", "--kill_on_bad_exit"}, "PET_KILL_ON_BAD_EXIT", "1", K::kValue,
       CTRUN_APPLY(std::string s; Status st = ApplyChoice(v, {"0", "1"}, s); c.kill_on_bad_exit = s != "0";
                   return st;),
       "0|1",
       "1: when another node fails for good (restarts spent, or not fixable by one) and closes the run, stop "
       "this node's workers within 1 s and exit 1 with its verdict line, as srun --kill-on-bad-exit does; "
       "0: run on until the workers end, as torchrun does.",
       G::kCtrun},
      {"--kill-timeout", {"--kill-timeout", "--kill_timeout"}, "PET_KILL_TIMEOUT", "30", K::kValue,
       CTRUN_APPLY(auto s = PositiveSeconds(v, "30"); if (!s.ok()) return s.status();
                   c.kill_timeout = *s; return Status::Ok();),
       "SECONDS",
       "Give up on workers not reaped this long after SIGKILL (e.g. stuck in uninterruptible sleep): "
       "report their pids and states and exit with code 4.",
       G::kCtrun},
      {"--preempt-grace", {"--preempt-grace", "--preempt_grace"}, "PET_PREEMPT_GRACE", nullptr, K::kValue,
       CTRUN_APPLY(auto s = PositiveSeconds(v, "120"); if (!s.ok()) return s.status();
                   c.preempt_grace = *s; return Status::Ok();),
       "SECONDS",
       "Preemption: on SIGTERM, SIGINT or --preempt-signal the workers get SECONDS (at most what is left of "
       "Slurm's time limit) to save; ctrun then exits 75 (saved) or 76 (missed). Off by default.",
       G::kCtrun},
      {"--preempt-signal", {"--preempt-signal", "--preempt_signal"}, "PET_PREEMPT_SIGNAL", nullptr, K::kValue,
       CTRUN_APPLY(return ApplyPreemptSignal(v, c);), "SIGNAL",
       "One more preemption notice besides SIGTERM and SIGINT, e.g. SIGUSR1 from sbatch --signal=B:USR1@60 "
       "(needs --preempt-grace).",
       G::kCtrun},
      {"--hang-stacks-timeout", {"--hang-stacks-timeout", "--hang_stacks_timeout"},
       "PET_HANG_STACKS_TIMEOUT", "10", K::kValue,
       CTRUN_APPLY(return ApplyTimeoutOrOff(v, c.hang_stacks_timeout, "10");), "SECONDS",
       "Before killing a hung worker (heartbeat expired, or still running after the shutdown grace), "
       "save its stacks with gdb to attempt_N/<local_rank>/stacks.txt, taking at most SECONDS; 0 = off.",
       G::kCtrun},
      {"--health-check", {"--health-check", "--health_check"}, "PET_HEALTH_CHECK", nullptr, K::kValue,
       CTRUN_APPLY(if (v.empty()) {
         return Status::InvalidArgument("must not be empty (give a command, e.g. --health-check "
                                        "/usr/share/ctrun/health-check.sh)");
       } c.health_check = std::string(v); return Status::Ok();),
       "CMD",
       "Run CMD (/bin/sh -c) before every join; a node whose check fails or times out leaves the job as "
       "unhealthy (exit code 4) and a spare takes its place (also CTRUN_HEALTH_CHECK).",
       G::kCtrun},
      {"--health-check-timeout", {"--health-check-timeout", "--health_check_timeout"},
       "PET_HEALTH_CHECK_TIMEOUT", "60", K::kValue,
       CTRUN_APPLY(auto s = PositiveSeconds(v, "60"); if (!s.ok()) return s.status();
                   c.health_check_timeout = *s; return Status::Ok();),
       "SECONDS", "A health check still running this long is killed and counts as failed.", G::kCtrun},
      {"--health-check-interval", {"--health-check-interval", "--health_check_interval"},
       "PET_HEALTH_CHECK_INTERVAL", "0", K::kValue,
       CTRUN_APPLY(return ApplyTimeoutOrOff(v, c.health_check_interval, "300");), "SECONDS",
       "Also run --health-check every SECONDS while the workers run; 0 = only before each join.",
       G::kCtrun},
      {"--max-unhealthy-nodes", {"--max-unhealthy-nodes", "--max_unhealthy_nodes"},
       "PET_MAX_UNHEALTHY_NODES", nullptr, K::kValue,
       CTRUN_APPLY(int n = 0; CTRUN_RETURN_IF_ERROR(ApplyNonNegativeInt(v, n, "1"));
                   c.max_unhealthy_nodes = n; return Status::Ok();),
       "N",
       "End the job on every node (exit code 5) once more than N nodes left it as unhealthy "
       "(default: nnodes max - min).",
       G::kCtrun},
      {"--ft-replicas", {"--ft-replicas", "--ft_replicas"}, "PET_FT_REPLICAS", nullptr, K::kValue,
       CTRUN_APPLY(return ApplyFtReplicas(v, c);), "MIN:MAX",
       "Fault tolerance without restarts: each node (or --ft-group-size nodes) is a replica group; a failed "
       "group restarts alone "
       "while the others train on in a per-step quorum of MIN to MAX groups served at --rdzv-endpoint "
       "(needs --rdzv-backend c10d; workers use it with --ft, docs/fault-tolerance.md).",
       G::kCtrun},
      {"--ft-group-size", {"--ft-group-size", "--ft_group_size"}, "PET_FT_GROUP_SIZE", "1", K::kValue,
       CTRUN_APPLY(int n = 0; CTRUN_RETURN_IF_ERROR(ApplyFtGroupSize(v, n)); c.ft_group_size = n;
                   return Status::Ok();),
       "NODES",
       "With --ft-replicas: the nodes of one replica group (default 1). Nodes R*NODES..R*NODES+NODES-1 by "
       "--node-rank form group R, with a rendezvous of their own; a failure restarts that group alone.",
       G::kCtrun},
      {"--ft-exact", {"--ft-exact", "--ft_exact"}, "PET_FT_EXACT", "0", K::kSwitch,
       CTRUN_APPLY(return ApplySwitch(v, c.ft_exact);), "",
       "With --ft-replicas: results independent of faults. The workers (--ft) split each step into fixed "
       "shards and add their gradients exactly, so any quorum ends on the same bits (docs/fault-tolerance.md).",
       G::kCtrun},
      {"--ft-join-timeout", {"--ft-join-timeout", "--ft_join_timeout"}, "PET_FT_JOIN_TIMEOUT", "60",
       K::kValue,
       CTRUN_APPLY(auto s = PositiveSeconds(v, "60"); if (!s.ok()) return s.status();
                   c.ft_join_timeout = *s; return Status::Ok();),
       "SECONDS", "With --ft-replicas: how long a quorum waits for a replica group that is alive but late.",
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
  constexpr size_t kFar = static_cast<size_t>(-1);
  const size_t whole_limit = std::max<size_t>(3, unknown.size() / 3) + 1;  // distances below this
  std::string_view best;
  size_t best_distance = kFar;
  for (const FlagSpec& f : Flags()) {
    for (std::string_view s : f.spellings) {
      size_t d = EditDistance(unknown, s);
      if (d >= whole_limit) d = kFar;
      // A misspelt abbreviation: one edit from the start of a longer spelling.
      if (unknown.size() >= 5 && s.size() > unknown.size()) {
        size_t start = EditDistance(unknown, s.substr(0, unknown.size()));
        if (start <= 1) d = std::min(d, start);
      }
      if (d < best_distance) {
        best = s;
        best_distance = d;
      }
    }
  }
  return std::string(best);
}

namespace {

// Every row of `rows` (each a list of spellings) with a spelling that
// `typed`, a long flag, is a proper prefix of: its index and its first such
// spelling (argparse's rule; a short flag has none).
template <typename Rows, typename Spellings>
std::vector<std::pair<size_t, std::string_view>> PrefixMatches(std::string_view typed, const Rows& rows,
                                                               Spellings spellings) {
  std::vector<std::pair<size_t, std::string_view>> matches;
  if (typed.size() <= 2 || typed.rfind("--", 0) != 0) return matches;
  for (size_t i = 0; i < rows.size(); ++i) {
    for (std::string_view s : spellings(rows[i])) {
      if (s.size() > typed.size() && s.rfind(typed, 0) == 0) {
        matches.emplace_back(i, s);
        break;
      }
    }
  }
  return matches;
}

std::string Ambiguous(std::string_view typed, const std::vector<std::pair<size_t, std::string_view>>& matches) {
  std::string names;
  for (const auto& [row, spelling] : matches) {
    if (!names.empty()) names += ", ";
    names += spelling;
  }
  return fmt::format("ambiguous flag '{}' could match {} (write more of it)", Quote(typed), names);
}

}  // namespace

Result<const FlagSpec*> ResolveFlag(std::string_view typed) {
  if (const FlagSpec* exact = FindFlag(typed)) return exact;
  const std::vector<FlagSpec>& flags = Flags();
  const auto matches = PrefixMatches(typed, flags, [](const FlagSpec& f) -> const auto& { return f.spellings; });
  if (matches.size() == 1) return &flags[matches[0].first];
  if (matches.size() > 1) return Status::InvalidArgument(Ambiguous(typed, matches));
  std::string near = ClosestSpelling(typed);
  if (near.empty()) {
    return Status::InvalidArgument(
        fmt::format("unknown flag '{}' (see ctrun --help for the flags ctrun knows)", Quote(typed)));
  }
  return Status::InvalidArgument(fmt::format("unknown flag '{}' (did you mean {}? see ctrun --help)", Quote(typed), near));
}

Result<size_t> ResolveSubcommandFlag(std::string_view typed, const std::vector<SubcommandFlag>& flags,
                                     std::string_view command) {
  for (size_t i = 0; i < flags.size(); ++i) {
    if (std::find(flags[i].begin(), flags[i].end(), typed) != flags[i].end()) return i;
  }
  const auto matches = PrefixMatches(typed, flags, [](const SubcommandFlag& f) -> const auto& { return f; });
  if (matches.size() == 1) return matches[0].first;
  if (matches.size() > 1) return Status::InvalidArgument(fmt::format("{}: {}", command, Ambiguous(typed, matches)));
  return Status::NotFound(fmt::format("{}: no flag '{}'", command, Quote(typed)));
}

}  // namespace ctrun::launcher
