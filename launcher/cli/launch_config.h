// LaunchConfig: everything one `ctrun` invocation was asked to do, validated.
//
// Filled only by launcher/cli/config.cc (from argv, PET_* and SLURM_* variables);
// read by the agent, the worker environment builder and the log setup. Plain
// data: copyable, no I/O, no invariants beyond those config.cc checks.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"

namespace ctrun::launcher {

using Seconds = std::chrono::duration<double>;

// A flag's seconds as the loop's Duration (for timers and deadlines).
inline Duration ToDuration(Seconds s) { return std::chrono::duration_cast<Duration>(s); }

enum class RdzvBackend { kStatic, kC10d, kEtcd, kEtcdV2, kEtcdV3 };

// How --nproc-per-node was given; kNumber carries the count itself.
enum class NprocKind { kNumber, kAuto, kCpu, kGpu };

// Redirect/tee selection: bit 1 = stdout, bit 2 = stderr (torchrun's Std).
// Either one value for all local ranks or a map "local_rank:value,...".
struct StreamSelection {
  int all = 0;                    // used for ranks not in per_rank
  std::map<int, int> per_rank;    // empty unless the map form was given
  int For(int local_rank) const {
    auto it = per_rank.find(local_rank);
    return it == per_rank.end() ? (per_rank.empty() ? all : 0) : it->second;
  }
  bool Stdout(int local_rank) const { return (For(local_rank) & 1) != 0; }
  bool Stderr(int local_rank) const { return (For(local_rank) & 2) != 0; }
};

// --rdzv-conf, parsed and checked. Unknown keys are rejected by config.cc.
struct RdzvConf {
  Seconds join_timeout{600};
  Seconds last_call_timeout{30};
  Seconds close_timeout{30};
  Seconds heartbeat_timeout{5};
  Seconds keep_alive_interval{5};
  int keep_alive_max_attempt = 3;
  Seconds read_timeout{60};
  Seconds timeout{900};              // static backend's store timeout
  std::optional<bool> is_host;
  std::string store_type = "tcp";    // "tcp" or "file"
  bool use_libuv = true;
  std::optional<std::string> token_file;
  // ctrun only: when this agent hosts the rendezvous, serve /metrics, the
  // status page and /api/runs on this port (0 = a free one); nullopt = none.
  std::optional<int> metrics_port;
  // TLS for the rendezvous (docs/security.md): paths as given, "" = unset.
  std::string tls_cert;         // this node's certificate (as server, and as client when tls_ca is set)
  std::string tls_key;          // its private key
  std::string tls_ca;           // CA that signed the server's (and, for mutual TLS, the agents') certificates
  std::string tls_server_name;  // name to check in the server's certificate instead of the endpoint host
  std::map<std::string, std::string> given;  // the pairs as the user wrote them
};

// The most nodes one replica group may have (--ft-group-size): the quorum
// server assembles at most this many parts of a group's call.
inline constexpr int kFtMaxGroupNodes = 64;

// Fault tolerance without restarts (ctrun only; docs/fault-tolerance.md):
// each replica group (a node, or --ft-group-size nodes) has a rendezvous of
// its own; the groups train in a per-step quorum served at --rdzv-endpoint.
struct FtConfig {
  int min_replicas = 1;             // --ft-replicas MIN:MAX
  int max_replicas = 1;
  int group_size = 1;               // --ft-group-size: nodes per replica group
  int group_index = 0;              // this node's group: --node-rank / group_size

  // The group's id in the quorum when it has several nodes ("group-K"; a
  // one-node group is its agent's node id instead).
  std::string group_id() const { return "group-" + std::to_string(group_index); }
  // The run id of a several-node group's own rendezvous: the run's id and
  // the group's, so each group rendezvous apart on the same server.
  std::string group_run_id(const std::string& run_id) const { return run_id + "." + group_id(); }
};

struct LaunchConfig {
  // Worker/node size.
  int min_nodes = 1;
  int max_nodes = 1;
  NprocKind nproc_kind = NprocKind::kNumber;
  int nproc_per_node = 1;            // resolved count (after auto/cpu/gpu)

  // Rendezvous.
  RdzvBackend rdzv_backend = RdzvBackend::kStatic;
  std::string rdzv_endpoint;         // as given ("" = none)
  // --rdzv-endpoint or PET_RDZV_ENDPOINT was set, not empty, and no
  // --standalone (an endpoint Slurm gives does not count).
  bool rdzv_endpoint_given = false;
  std::string rdzv_host;             // parsed endpoint, defaults filled (see config.h)
  int rdzv_port = 0;                 // 1..65535, or 0 (bind a free port: --standalone, HOST:0)
  std::string rdzv_id = "none";
  RdzvConf rdzv_conf;
  bool standalone = false;
  int node_rank = 0;
  bool node_rank_given = false;      // --node-rank or PET_NODE_RANK was set
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool master_port_given = false;    // --master-port or PET_MASTER_PORT was set
  std::optional<std::string> local_addr;

  // Supervision.
  int max_restarts = 0;
  Seconds monitor_interval{0.1};     // accepted for compatibility; ctrun is event driven
  std::string start_method = "spawn";
  std::vector<int> signals_to_handle; // signal numbers, in the order given
  // --shutdown-timeout (PET_SHUTDOWN_TIMEOUT), else TORCH_ELASTIC_SHUTDOWN_TIMEOUT,
  // else 30: seconds between the stop signal and SIGKILL.
  Seconds shutdown_grace{30};
  bool shutdown_timeout_given = false;  // --shutdown-timeout or PET_SHUTDOWN_TIMEOUT was set
  Seconds exit_barrier_timeout{300};
  bool exit_code_from_root_cause = false;  // ctrun only: exit with the root-cause worker's code
  // Worker heartbeat (ctrun only): 0 = off. The initial timeout runs from a
  // worker's start to its first touch; nullopt = the same as heartbeat_timeout.
  Seconds heartbeat_timeout{0};
  std::optional<Seconds> heartbeat_initial_timeout;
  // Straggler detection (ctrun only; rendezvous/machine/straggler.h): a rank
  // whose step time is above straggler_factor x the job median for
  // straggler_intervals keep-alive reports in a row is flagged; 0 = never.
  double straggler_factor = 1.5;
  int straggler_intervals = 5;
  // Crash-loop policy and bounded kill (ctrun only; launcher/agent/restart_policy.h).
  // --restart-backoff: the delay before a restart after a crash, doubled per
  // crash up to 32x, reset by a run of --min-healthy-uptime; 0 = none.
  Seconds restart_backoff{0};
  Seconds min_healthy_uptime{60};
  // --fail-fast-on-startup: the first attempt's crash before any progress
  // ends the job with exit code 3 (do not requeue).
  bool fail_fast_on_startup = false;
  // --restart-on-any-failure: restart even a failure no restart can fix (a
  // bad launch, the same error twice in a row), as torchrun does; off, such
  // a failure ends the job with exit code 3 (do not requeue).
  bool restart_on_any_failure = false;
  // --kill-on-bad-exit: when another node fails for good and closes the run,
  // stop the workers (within 1 s) and exit 1 with its verdict, as srun
  // --kill-on-bad-exit does; false: run on until the workers end (torchrun).
  bool kill_on_bad_exit = true;
  // --kill-timeout: how long to wait for the workers to be reaped after
  // SIGKILL before giving up on them (exit code 4).
  Seconds kill_timeout{30};
  // Preemption (ctrun only; launcher/agent/preemption.h). --preempt-grace:
  // the workers' budget to save after a notice (SIGTERM, SIGINT or
  // --preempt-signal); nullopt = preemption off (signals stop the workers as
  // in torchrun). --preempt-signal: one more notice signal (e.g. SIGUSR1 from
  // Slurm's --signal), 0 = none; it is added to signals_to_handle.
  std::optional<Seconds> preempt_grace;
  int preempt_signal = 0;
  // SLURM_JOB_END_TIME (Unix seconds), where Slurm sets it: a notice's budget
  // is at most what is left of it, less a margin.
  std::optional<double> slurm_job_end_unix_s;
  // CTRUN_PORT_SNIFF_DEADLINE_MS (a knob for tests; a positive number of
  // milliseconds, anything else ignored): how long a connection to the
  // rendezvous port this agent hosts may stay silent (rendezvous/grpc/net/
  // port_mux.h); nullopt = the mux's 10 s.
  std::optional<std::chrono::milliseconds> port_sniff_deadline;
  // --hang-stacks-timeout (ctrun only): before a worker is killed for a hang,
  // its stacks are saved with gdb, for at most this long; 0 = off.
  Seconds hang_stacks_timeout{10};
  // Node health (ctrun only; launcher/health/): --health-check runs CMD
  // (/bin/sh -c) before every join and, every --health-check-interval
  // seconds (0 = only before joins), while the workers run; a failure or a
  // run past --health-check-timeout makes the node leave as unhealthy.
  std::optional<std::string> health_check;
  Seconds health_check_timeout{60};
  Seconds health_check_interval{0};
  // --max-unhealthy-nodes: job-wide; nullopt = nnodes max - min.
  std::optional<int> max_unhealthy_nodes;
  // ctrun only: worker rank 0 hosts the c10d store (TORCHELASTIC_USE_AGENT_STORE=False)
  // instead of the agent (rendezvous/store/store_server.h).
  bool no_agent_store = false;
  // ctrun only: append one JSON line per agent event here (launcher/logs/event_log.h).
  std::optional<std::string> events_file;

  // User-code launch.
  std::string role = "default";
  bool module = false;               // -m: python -u -m <script>
  bool no_python = false;            // exec <script> directly
  bool run_path = false;
  std::string python_exec;           // PYTHON_EXEC, else first python3 on PATH
  std::string script;                // training script, module or binary
  std::vector<std::string> script_args;
  // --virtual-local-rank: every worker gets LOCAL_RANK=0 and
  // CUDA_VISIBLE_DEVICES narrowed to its own device (launcher/process/worker_env.h).
  bool virtual_local_rank = false;

  // --ft-replicas (ctrun only); nullopt = off.
  std::optional<FtConfig> ft;
  int ft_group_size = 1;             // --ft-group-size (copied into ft once it is checked)
  Seconds ft_join_timeout{60};       // --ft-join-timeout: how long a quorum waits for a late group
  bool ft_exact = false;             // --ft-exact: the workers get CTRUN_FT_EXACT=1

  // Logs.
  std::optional<std::string> log_dir;
  StreamSelection redirects;
  StreamSelection tee;
  std::optional<std::set<int>> local_ranks_filter;  // nullopt = all ranks
  std::optional<std::string> logs_specs;
  std::optional<std::string> numa_binding;
  // --event-log-handler: null, console (each event also a JSON line on
  // stderr) or dynamic_rendezvous (silent, as null); the table default is null.
  std::optional<std::string> event_log_handler;
  // --duplicate-stdout-filters / --duplicate-stderr-filters: a worker line
  // that contains any of these is also written to the attempt's
  // filtered_stdout.log / filtered_stderr.log. Empty = no such file.
  std::vector<std::string> duplicate_stdout_filters;
  std::vector<std::string> duplicate_stderr_filters;
  std::string log_line_prefix_template;  // TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE or ""
  // --dedup-logs: identical console lines of several local ranks print once
  // (LineDedup); the log files stay per rank.
  bool dedup_logs = false;
  // CTRUN_DEDUP_WINDOW_MS, when it holds a positive number of milliseconds:
  // --dedup-logs' window instead of LineDedup's default (meant for tests,
  // which cannot bound how far apart loaded ranks print; anything else is
  // ignored).
  std::optional<std::chrono::milliseconds> dedup_window;
  // --share-logs: the workers' output lines also go to the rendezvous server
  // (gRPC backend only), for `ctrun logs`. Off: no line leaves the node.
  bool share_logs = false;

  bool is_single_node() const { return max_nodes == 1; }
  // The rendezvous runs in-process, with no network: one node, except c10d
  // with an endpoint the user gave, which joins (or hosts) the rendezvous at
  // that endpoint as torchrun's c10d does, so the job shows on that server's
  // status page, /api/runs and metrics.
  // Under --ft-replicas a one-node group's rendezvous is local too (its
  // endpoint serves the quorum instead); a group of several nodes
  // rendezvous at the endpoint under its own run id (FtConfig).
  bool local_rendezvous() const {
    if (ft) return ft->group_size == 1;
    return is_single_node() && !(rdzv_backend == RdzvBackend::kC10d && rdzv_endpoint_given);
  }
};

}  // namespace ctrun::launcher
