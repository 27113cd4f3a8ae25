#include "launcher/app/numa_setup.h"

#include <spdlog/spdlog.h>

#include <optional>
#include <string>

#include "launcher/numa/placement.h"
#include "launcher/numa/topology.h"

namespace ctrun::launcher {

Result<std::vector<WorkerBinding>> ResolveNumaBinding(const LaunchConfig& config,
                                                      const Environment& env) {
  std::vector<WorkerBinding> bindings;
  if (!config.numa_binding) return bindings;
  const std::optional<NumaMode> mode = ParseNumaMode(*config.numa_binding);
  if (!mode) {
    return Status::InvalidArgument("--numa-binding '" + *config.numa_binding +
                                   "': not a valid choice (use one of: node, socket, exclusive, "
                                   "core-complex)");
  }
  Result<Topology> topology = ReadHostTopology();
  if (!topology.ok()) {
    return Status::InvalidArgument("--numa-binding: " + topology.status().message() +
                                   "; drop --numa-binding to run unbound");
  }
  std::optional<std::string> visible;
  if (auto it = env.find("CUDA_VISIBLE_DEVICES"); it != env.end()) visible = it->second;
  Result<std::vector<int>> gpus = VisibleGpus(*topology, visible);
  if (!gpus.ok()) return gpus.status();
  std::optional<std::string> order;
  if (auto it = env.find("CUDA_DEVICE_ORDER"); it != env.end()) order = it->second;
  if (auto warning = GpuOrderWarning(*topology, *gpus, order)) spdlog::warn("{}", *warning);
  Result<std::vector<Placement>> placements =
      PlaceWorkers(*topology, *gpus, *mode, config.nproc_per_node);
  if (!placements.ok()) return placements.status();

  const std::string no_memory = MemoryPolicyUnavailable();
  if (!no_memory.empty()) {
    spdlog::warn("--numa-binding: workers are bound to their CPUs only, not their memory: {}",
                 no_memory);
  }
  for (Placement& p : *placements) {
    if (!no_memory.empty()) p.memory_nodes.clear();
    WorkerBinding b;
    b.cpus = p.cpus;
    b.memory_nodes = p.memory_nodes;
    b.summary = DescribePlacement(p, *mode);
    spdlog::info("local rank {}: {}", p.local_rank, b.summary);
    bindings.push_back(std::move(b));
  }
  return bindings;
}

}  // namespace ctrun::launcher
