// WorkerBinding: the CPUs and the preferred memory nodes of one worker
// (--numa-binding), as plain data computed before any worker starts
// (launcher/numa/ computes it). WorkerSet applies it in the forked child
// before exec, so the worker and every process and thread it makes inherit
// it.
//
// Thread model: PreparedBinding is built in the parent (it allocates) and
// Apply runs in the forked child (async-signal-safe: syscalls only).
#pragma once

#include <sched.h>

#include <string>
#include <vector>

namespace ctrun::launcher {

struct WorkerBinding {
  std::vector<int> cpus;          // CPU ids; empty: the worker is not bound
  std::vector<int> memory_nodes;  // NUMA nodes its memory is preferred on; empty: left alone
  std::string summary;            // plain English, for the console, events and failure report
};

class PreparedBinding {
 public:
  // What Apply failed to set.
  enum class Step { kNone, kCpus, kMemory };

  explicit PreparedBinding(const WorkerBinding& binding);
  ~PreparedBinding();
  PreparedBinding(const PreparedBinding&) = delete;
  PreparedBinding& operator=(const PreparedBinding&) = delete;

  // Binds the calling process: sched_setaffinity to the CPUs, then
  // set_mempolicy MPOL_PREFERRED (one node) or MPOL_PREFERRED_MANY (several;
  // MPOL_PREFERRED on the first where the kernel predates it, < 5.15).
  // Returns 0, or the errno of the failed step, set in *step.
  int Apply(Step* step) const noexcept;

 private:
  cpu_set_t* cpus_ = nullptr;  // null: no CPU binding
  size_t cpus_size_ = 0;
  std::vector<unsigned long> nodes_;  // empty: no memory policy
  int node_count_ = 0;
  int first_node_ = 0;
};

// "" when this process may set its memory policy; else why not (a
// container's seccomp profile refuses the NUMA calls without CAP_SYS_NICE).
// Probed with get_mempolicy, which such profiles refuse with the others.
std::string MemoryPolicyUnavailable();

}  // namespace ctrun::launcher
