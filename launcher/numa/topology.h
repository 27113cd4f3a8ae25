// The machine as --numa-binding sees it: its CPUs (each with its core, its
// last-level cache, its NUMA node and its package), the CPUs this process may
// use, and its NVIDIA GPUs with their NUMA nodes. A plain value, read once
// through hwloc (the real machine, an XML export, or a synthetic
// description); the placement (placement.h) is a pure function of it.
//
// GPUs are found without CUDA: PCI devices of vendor 0x10de whose class is
// 0x03xx (display or 3D controller), listed in PCI bus id order (domain,
// bus, device, function) — CUDA's order with CUDA_DEVICE_ORDER=PCI_BUS_ID,
// and its default order on machines whose GPUs are all of one model.
//
// Thread-safe: the readers share no state.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"

namespace ctrun::launcher {

// One logical CPU (an hwloc PU).
struct Cpu {
  int id = 0;         // the OS index: what sched_setaffinity and /proc take
  int core = 0;       // its physical core, named by the smallest id among the core's CPUs
  int cache = 0;      // its last-level cache domain (L3, or the deepest cache there is),
                      // named by the smallest id sharing it; its core when no cache is known
  int numa_node = 0;  // OS index of its NUMA node; 0 when the machine reports none
  int package = 0;    // OS index of its package (socket); 0 when none is reported
};

struct Gpu {
  std::string pci_bus_id;  // "0000:17:00.0"
  int numa_node = -1;      // OS index of its NUMA node; -1 when unknown
  int device_id = 0;       // PCI device id: its model
};

struct Topology {
  std::vector<Cpu> cpus;      // every CPU hwloc reports, by id
  std::vector<int> allowed;   // the ids this process may run on, sorted
  std::vector<Gpu> gpus;      // NVIDIA GPUs, in PCI bus id order
};

// The machine ctrun runs on. `allowed` is hwloc's allowed set (the cgroup's
// cpuset) intersected with this process's affinity (sched_getaffinity), so a
// CPU set inherited from taskset, numactl or Slurm is respected.
// FailedPrecondition naming hwloc's error when the topology cannot be read.
Result<Topology> ReadHostTopology();

// An hwloc XML file (lstopo --of xml, hwloc_topology_export_xml).
// FailedPrecondition naming the file when hwloc cannot read it.
Result<Topology> ReadXmlTopology(const std::string& path);

// An hwloc synthetic description, e.g. "pack:2 numa:2 l3:2 core:4 pu:2".
// InvalidArgument naming it when hwloc refuses it.
Result<Topology> ReadSyntheticTopology(const std::string& description);

}  // namespace ctrun::launcher
