// Where --numa-binding puts each local worker: a pure function of the
// topology (topology.h), the GPUs the workers see, the mode and the number
// of local workers. It follows torch 2.9's torch/distributed/numa/binding.py
// (the numactl flavour): local rank i is bound near GPU i, and its memory is
// preferred (not forced) on the NUMA node(s) it runs on.
//
//   node          every allowed CPU of the GPU's NUMA node; memory preferred there
//   socket        every allowed CPU of the NUMA nodes on the GPU node's package;
//                 memory preferred on those nodes
//   exclusive     a disjoint share of whole physical cores of the GPU's NUMA
//                 node, split among the visible GPUs on that node in index
//                 order (the first ones get one core more when it does not
//                 divide); memory preferred on the node
//   core-complex  one last-level-cache domain (L3) of the GPU's NUMA node: the
//                 j-th GPU on the node gets the j-th domain (largest first, then
//                 lowest CPU), wrapping around; memory preferred on the node
//
// Without visible GPUs the local ranks stand in for them: they are spread
// over the NUMA nodes that have allowed CPUs in contiguous blocks (rank r of
// n on node r*N/n of those N nodes), so `exclusive` gives a CPU-only job
// disjoint sets that cover the allowed CPUs.
//
// Only allowed CPUs (Topology::allowed) are ever handed out. A GPU whose
// NUMA node is unknown counts as on the first node with allowed CPUs.
// Thread-safe: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "launcher/numa/topology.h"

namespace ctrun::launcher {

enum class NumaMode { kNode, kSocket, kExclusive, kCoreComplex };

// "node", "socket", "exclusive", "core-complex"; nullopt for anything else.
std::optional<NumaMode> ParseNumaMode(std::string_view name);
const char* NumaModeName(NumaMode mode);

// The GPUs the workers see, as indices into topology.gpus, in CUDA device
// order: all of them when `cuda_visible_devices` is unset; else its
// comma-separated indices, as CUDA reads them — the list ends at the first
// entry that is negative or names no GPU, and "" means none. InvalidArgument
// for an entry that is not a number (GPU-/MIG- UUIDs cannot be mapped
// without CUDA).
Result<std::vector<int>> VisibleGpus(const Topology& topology,
                                     const std::optional<std::string>& cuda_visible_devices);

// A warning when CUDA may number the visible GPUs differently from ctrun:
// they are of different models (PCI device ids) and `cuda_device_order` (the
// CUDA_DEVICE_ORDER variable) is not PCI_BUS_ID, so CUDA's default fastest-
// first order may differ from PCI bus id order. nullopt otherwise.
std::optional<std::string> GpuOrderWarning(const Topology& topology,
                                           const std::vector<int>& visible_gpus,
                                           const std::optional<std::string>& cuda_device_order);

struct Placement {
  int local_rank = 0;
  int gpu = -1;                   // CUDA device index (among the visible ones); -1: no GPU
  std::string gpu_pci_bus_id;     // "" without a GPU
  int numa_node = 0;              // the NUMA node it is placed on
  std::vector<int> cpus;          // sorted CPU ids, never empty
  std::vector<int> memory_nodes;  // sorted NUMA nodes its memory is preferred on
};

// The placement of local ranks 0 .. nproc-1. `visible_gpus` indexes
// topology.gpus (VisibleGpus). InvalidArgument, naming the fix, when a
// binding is impossible: more local ranks than visible GPUs, a GPU on a
// NUMA node with no allowed CPU, more `exclusive` sharers on a node than
// physical cores, no allowed CPU at all.
Result<std::vector<Placement>> PlaceWorkers(const Topology& topology,
                                            const std::vector<int>& visible_gpus, NumaMode mode,
                                            int nproc);

// Sorted ids as ranges: {0,1,2,3,8,10,11} -> "0-3,8,10-11"; {} -> "".
std::string FormatIdList(const std::vector<int>& sorted_ids);

// The binding in plain English, without the rank, e.g. "CPUs 0-7,32-39,
// memory preferred on NUMA node 0 (--numa-binding node, GPU 0 at PCI
// 0000:18:00.0)"; "(--numa-binding exclusive, no GPU)" without one, and
// "memory not bound" without memory nodes.
std::string DescribePlacement(const Placement& placement, NumaMode mode);

}  // namespace ctrun::launcher
