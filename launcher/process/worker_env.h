// The environment each worker process starts with, and the rank layout it
// carries: exactly what torchrun's LocalElasticAgent hands its workers
// (spec §2). Pure functions over plain data: no I/O, no reads of the real
// environment (the caller passes the agent's own environment in), so every
// function is safe to call from any thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ctrun::launcher {

// Name -> value. launcher/cli/config.h declares the identical alias; redeclaring
// an alias to the same type is legal, so either header may come first.
using Environment = std::map<std::string, std::string>;

// One worker's position in the job for one rendezvous round.
struct WorkerRanks {
  int local_rank = 0;        // 0 .. local_world_size-1 on this node
  int rank = 0;              // global rank: Σ lws of lower group ranks + local_rank
  int group_rank = 0;        // this node's rank in the round
  int group_world_size = 0;  // nodes in the round
  int role_rank = 0;         // rank within the role (== rank for one role)
  int role_world_size = 0;   // workers in the role (== world_size for one role)
  int local_world_size = 0;  // this node's nproc
  int world_size = 0;        // Σ every node's nproc
};

// What every worker of one node shares in one round.
struct RoundEnv {
  std::string master_addr;  // MASTER_ADDR, used verbatim
  int master_port = 0;      // MASTER_PORT
  int restart_count = 0;    // TORCHELASTIC_RESTART_COUNT (max - remaining, per node)
  int max_restarts = 0;     // TORCHELASTIC_MAX_RESTARTS
  std::string run_id;       // TORCHELASTIC_RUN_ID (the rdzv id)
  bool use_agent_store = false;  // TORCHELASTIC_USE_AGENT_STORE: "True"/"False"
  std::string role = "default";  // ROLE_NAME
  // TORCHELASTIC_SIGNALS_TO_HANDLE, joined with ',' in this order
  // (e.g. {"SIGTERM","SIGINT"} -> "SIGTERM,SIGINT"); exported even when empty.
  std::vector<std::string> signals_to_handle_names;
  // --virtual-local-rank: LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES = the
  // worker's own device (VirtualDevice below).
  bool virtual_local_rank = false;
  // CTRUN_EXCLUDE_NODE_FILE: where a worker writes to ask for its node's
  // exclusion (launcher/health/exclusion_request.h); "" = not set.
  std::string exclude_node_file;
};

// Returns the worker's whole environment: every variable of `base` (the
// agent's own environment) with the torchrun variables set on top, torchrun's
// values winning over any of the same name in `base`:
//   LOCAL_RANK RANK GROUP_RANK GROUP_WORLD_SIZE ROLE_RANK ROLE_NAME
//   ROLE_WORLD_SIZE LOCAL_WORLD_SIZE WORLD_SIZE MASTER_ADDR MASTER_PORT
//   TORCHELASTIC_RESTART_COUNT TORCHELASTIC_MAX_RESTARTS TORCHELASTIC_RUN_ID
//   TORCHELASTIC_USE_AGENT_STORE TORCHELASTIC_SIGNALS_TO_HANDLE
//   TORCHELASTIC_ERROR_FILE (= error_file, always set)
//   CTRUN_HEARTBEAT_FILE (= heartbeat_file, only when it is not empty)
//   CTRUN_EXCLUDE_NODE_FILE (= round.exclude_node_file, when not empty)
// TORCH_NCCL_ASYNC_ERROR_HANDLING keeps the value `base` gives it, else "1";
// torch 1.x's bare NCCL_ASYNC_ERROR_HANDLING is never added (torch 2.x warns
// about it on every rank), only passed through from `base`.
// With round.virtual_local_rank, LOCAL_RANK is "0" and CUDA_VISIBLE_DEVICES
// is VirtualDevice(base, local_rank) (left as in `base` where that is nullopt;
// CheckVirtualLocalRank rules that out first).
// Everything else in `base` passes through untouched, notably
// CUDA_VISIBLE_DEVICES (otherwise never remapped), OMP_NUM_THREADS (the caller
// adds "1" to `base` when OmpNumThreadsWarning says so) and
// TORCHELASTIC_TIMER_FILE. Never fails.
Environment BuildWorkerEnv(const Environment& base, const WorkerRanks& ranks,
                           const RoundEnv& round, const std::string& error_file,
                           const std::string& heartbeat_file = "");

// Only the variables BuildWorkerEnv sets or changes (the same rules): what a
// launch merges into `base` with ToEnvStrings(base, overrides) without
// copying `base` once per worker.
Environment WorkerEnvOverrides(const Environment& base, const WorkerRanks& ranks,
                               const RoundEnv& round, const std::string& error_file,
                               const std::string& heartbeat_file = "");

// torch's virtual local rank device of `local_rank`: the local_rank-th
// comma-separated entry of base's CUDA_VISIBLE_DEVICES, spaces trimmed
// (indices, UUIDs or MIG ids alike); without CUDA_VISIBLE_DEVICES, the local
// rank itself. nullopt when CUDA_VISIBLE_DEVICES has too few entries.
std::optional<std::string> VirtualDevice(const Environment& base, int local_rank);

// For --virtual-local-rank: "" when every local rank 0..nproc-1 has a
// VirtualDevice, else the one-line error naming CUDA_VISIBLE_DEVICES and the
// fix.
std::string CheckVirtualLocalRank(const Environment& base, int nproc);

// Returns the ranks of the local workers of the node at `group_rank`, in
// local-rank order, given every node's local world size in group-rank order
// (nodes may differ). With a single role, role ranks equal global ranks, as
// torch's two-level (role, group rank) sort gives.
// Returns an empty vector when group_rank is outside [0, size) or any local
// world size is negative.
std::vector<WorkerRanks> AssignRanks(int group_rank,
                                     const std::vector<int>& local_world_sizes);

// torchrun's OMP_NUM_THREADS rule. When `env` has no OMP_NUM_THREADS and
// nproc_per_node > 1, returns the warning torchrun logs (its exact text: a
// newline, a line of '*', the sentence, a line of '*') and the caller must
// then set OMP_NUM_THREADS=1 in the environment the workers inherit.
// Otherwise returns nullopt and nothing is to be changed.
std::optional<std::string> OmpNumThreadsWarning(const Environment& env,
                                                int nproc_per_node);

// Returns "NAME=value" strings in name order, ready for an envp array.
std::vector<std::string> ToEnvStrings(const Environment& env);
// The same for `base` with `overrides` over it: ToEnvStrings of the union,
// where a name in both takes its value from `overrides`.
std::vector<std::string> ToEnvStrings(const Environment& base, const Environment& overrides);

}  // namespace ctrun::launcher
