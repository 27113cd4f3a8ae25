// --numa-binding, before anything starts: this machine's topology (hwloc),
// the GPUs the workers see (CUDA_VISIBLE_DEVICES), and each local rank's
// binding (launcher/numa/placement.h), as the plain WorkerBinding the worker
// set applies in each forked child. Prints one line per local rank.
// Thread model: main thread, before the agent starts.
#pragma once

#include <vector>

#include "base/result.h"
#include "launcher/cli/config.h"
#include "launcher/process/cpu_binding.h"

namespace ctrun::launcher {

// Without config.numa_binding: an empty list. Else one binding per local
// rank 0 .. nproc_per_node-1, each printed once ("local rank 0: CPUs 0-7,
// memory preferred on NUMA node 0 (--numa-binding node, GPU 0 at PCI ...)").
// Where the kernel refuses memory policies, one warning, and the workers are
// bound to their CPUs only. InvalidArgument (a usage error: exit 2, nothing
// started) when hwloc cannot read the topology or the binding is impossible.
Result<std::vector<WorkerBinding>> ResolveNumaBinding(const LaunchConfig& config,
                                                      const Environment& env);

}  // namespace ctrun::launcher
