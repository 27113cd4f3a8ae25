// Defaults that a Slurm job step implies for ctrun's flags, so that
// `srun --ntasks-per-node=1 ctrun train.py` needs no rendezvous flags.
//
// Detection: ctrun is inside a Slurm job step when SLURM_JOB_ID and
// SLURM_STEP_ID are set (srun sets the step id; a batch script or an salloc
// shell has none, so a plain `ctrun` there stays a single-node launch) and a
// node count is set (SLURM_STEP_NUM_NODES, SLURM_NNODES or
// SLURM_JOB_NUM_NODES, first found). CTRUN_IGNORE_SLURM=1 turns detection off.
//
// A Slurm default applies only to a flag given neither on the command line
// nor by its PET_* variable (launcher/cli/config.cc asks per flag, in table
// order). With N = the step's node count:
//   --nnodes            N (an error when srun started more ctrun tasks than
//                       nodes: ctrun wants one task per node)
//   --nproc-per-node    SLURM_GPUS_ON_NODE when > 0, else the number of
//                       entries in CUDA_VISIBLE_DEVICES when set, else
//                       SLURM_CPUS_PER_TASK, else none (torchrun's 1)
//   --rdzv-backend      c10d, unless --master-addr or --master-port was given
//   --rdzv-endpoint     c10d only: <first host>:<29400 + (job id + step id) % 100>
//   --rdzv-id           <SLURM_JOB_ID>.<SLURM_STEP_ID>
//   --node-rank         SLURM_NODEID (a hint for c10d, the rank for static)
//   --master-addr       static only: the first host
//   --local-addr        the NodeAddr of SLURMD_NODENAME when that name does
//                       not resolve; else none (the host name, as torchrun)
//   --signals-to-handle torchrun's list plus SIGUSR1 (sbatch --signal=USR1@T)
// Endpoint, node rank, master and local address only when the job spans
// more than one node; with --standalone only the worker count and signals.
// The first host is the first of SLURM_STEP_NODELIST (else
// SLURM_JOB_NODELIST, else SLURM_NODELIST), kept as a name when it resolves,
// else replaced by its NodeAddr from `scontrol show node`.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "launcher/cli/config.h"
#include "launcher/cli/launch_config.h"

namespace ctrun::launcher {

// Turns Slurm node names into addresses other nodes can reach. The system
// one asks getaddrinfo and scontrol; tests substitute a fake.
class NodeAddressResolver {
 public:
  virtual ~NodeAddressResolver() = default;
  // True when `name` is an IP literal or getaddrinfo resolves it.
  virtual bool Resolves(const std::string& name) const = 0;
  // The node's NodeAddr as `scontrol show node NAME` prints it. Errors:
  // Unavailable when scontrol cannot run or fails (the message carries its
  // first output line), NotFound when it prints no NodeAddr.
  virtual Result<std::string> NodeAddr(const std::string& name) const = 0;
};

// The real resolver. NodeAddr runs scontrol from PATH and blocks until it
// exits; call it before ctrun starts threads or installs SIGCHLD handling.
const NodeAddressResolver& SystemNodeAddressResolver();

// The NodeAddr value in `scontrol show node` output; NotFound when absent
// or empty. Pure.
Result<std::string> NodeAddrFromScontrol(std::string_view output);

// A default value and the variable it came from, for error messages.
struct SlurmDefault {
  std::string value;
  std::string source;  // e.g. "SLURM_NODEID"
};

class SlurmEnv {
 public:
  // A SlurmEnv when `env` is inside a job step (see the file comment), else
  // nullopt. Reads nothing else yet. `env` and `resolver` are borrowed and
  // must outlive the SlurmEnv.
  static std::optional<SlurmEnv> Detect(const Environment& env, const NodeAddressResolver& resolver);

  // The Slurm default for the flag whose canonical name is `flag`, or
  // nullopt when Slurm implies none. `so_far` holds the rows before `flag`
  // already applied; `user` maps each flag given on the command line or by
  // PET_* (canonical name) to its value. The value passes the flag's own
  // check afterwards.
  // Errors: InvalidArgument, one line naming the SLURM_* variable, its value
  // and the fix, for a value this flag needs that is malformed or
  // inconsistent (a bad node list, SLURM_NODEID not below the node count,
  // more tasks than nodes), or a first host that neither resolves nor has a
  // NodeAddr.
  Result<std::optional<SlurmDefault>> DefaultFor(std::string_view flag, const LaunchConfig& so_far,
                                                 const std::map<std::string_view, std::string>& user) const;

 private:
  SlurmEnv(const Environment& env, const NodeAddressResolver& resolver) : env_(&env), resolver_(&resolver) {}

  std::optional<std::string> Get(std::string_view name) const;
  Result<SlurmDefault> Nodes() const;
  Result<std::optional<SlurmDefault>> Nproc() const;
  Result<SlurmDefault> NodeRank(int nnodes) const;
  Result<SlurmDefault> FirstHostAddress() const;
  Result<std::optional<SlurmDefault>> LocalAddress() const;
  Result<uint64_t> Id(std::string_view name) const;

  const Environment* env_;
  const NodeAddressResolver* resolver_;
};

}  // namespace ctrun::launcher
