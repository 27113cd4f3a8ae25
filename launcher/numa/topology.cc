#include "launcher/numa/topology.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <tuple>

#include "launcher/numa/hwloc_loader.h"

namespace ctrun::launcher {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* b) const { hwloc_bitmap_free(b); }
};
using BitmapPtr = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

std::string Errno(int err) { return std::strerror(err); }

// A topology ready for a backend to be set: PCI devices kept (GPUs are
// "important" to hwloc, class 0x03), OS devices and misc objects dropped.
// hwloc's library is loaded here, on first use.
Result<TopologyPtr> NewTopology() {
  if (Status loaded = LoadHwloc(); !loaded.ok()) return loaded;
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    return Status::FailedPrecondition("hwloc cannot start: " + Errno(errno));
  }
  TopologyPtr t(raw);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  hwloc_topology_set_type_filter(raw, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_type_filter(raw, HWLOC_OBJ_MISC, HWLOC_TYPE_FILTER_KEEP_NONE);
  return t;
}

int FirstOr(hwloc_const_bitmap_t set, int fallback) {
  const int first = set ? hwloc_bitmap_first(set) : -1;
  return first >= 0 ? first : fallback;
}

Cpu DescribeCpu(hwloc_obj_t pu) {
  Cpu cpu;
  cpu.id = static_cast<int>(pu->os_index);
  cpu.core = cpu.id;
  cpu.numa_node = FirstOr(pu->nodeset, 0);
  unsigned cache_depth = 0;
  for (hwloc_obj_t a = pu->parent; a != nullptr; a = a->parent) {
    if (a->type == HWLOC_OBJ_CORE) cpu.core = FirstOr(a->cpuset, cpu.id);
    if (a->type == HWLOC_OBJ_PACKAGE) cpu.package = static_cast<int>(a->logical_index);
    // Data and unified caches only (instruction caches never span cores).
    if (hwloc_obj_type_is_dcache(a->type) && a->attr->cache.depth > cache_depth) {
      cache_depth = a->attr->cache.depth;
      cpu.cache = FirstOr(a->cpuset, cpu.id);
    }
  }
  if (cache_depth == 0) cpu.cache = cpu.core;
  return cpu;
}

std::vector<int> Members(hwloc_const_bitmap_t set) {
  std::vector<int> ids;
  unsigned id;
  hwloc_bitmap_foreach_begin(id, set) { ids.push_back(static_cast<int>(id)); }
  hwloc_bitmap_foreach_end();
  return ids;
}

// This process's affinity (sched_getaffinity), sized for `max_cpu`.
Result<std::vector<int>> ProcessAffinity(int max_cpu) {
  const int n = std::max(max_cpu + 1, CPU_SETSIZE);
  cpu_set_t* set = CPU_ALLOC(n);
  if (set == nullptr) return Status::FailedPrecondition("out of memory for a CPU set");
  const size_t size = CPU_ALLOC_SIZE(n);
  CPU_ZERO_S(size, set);
  std::vector<int> ids;
  if (::sched_getaffinity(0, size, set) != 0) {
    const int err = errno;
    CPU_FREE(set);
    return Status::FailedPrecondition("cannot read this process's CPU affinity: " + Errno(err));
  }
  for (int i = 0; i < n; ++i) {
    if (CPU_ISSET_S(i, size, set)) ids.push_back(i);
  }
  CPU_FREE(set);
  return ids;
}

Topology Extract(hwloc_topology_t t) {
  Topology topo;
  hwloc_obj_t pu = nullptr;
  while ((pu = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PU, pu)) != nullptr) {
    topo.cpus.push_back(DescribeCpu(pu));
  }
  std::sort(topo.cpus.begin(), topo.cpus.end(),
            [](const Cpu& a, const Cpu& b) { return a.id < b.id; });
  topo.allowed = Members(hwloc_topology_get_allowed_cpuset(t));

  struct Found {
    std::tuple<unsigned, unsigned, unsigned, unsigned> key;
    Gpu gpu;
  };
  std::vector<Found> found;
  hwloc_obj_t dev = nullptr;
  while ((dev = hwloc_get_next_pcidev(t, dev)) != nullptr) {
    const auto& p = dev->attr->pcidev;
    if (p.vendor_id != 0x10de || (p.class_id >> 8) != 0x03) continue;
    Found f;
    f.key = {p.domain, p.bus, p.dev, p.func};
    char id[32];
    std::snprintf(id, sizeof(id), "%04x:%02x:%02x.%x", p.domain, p.bus, p.dev, p.func);
    f.gpu.pci_bus_id = id;
    f.gpu.device_id = p.device_id;
    // The first NUMA node of the smallest CPU-side object holding it.
    hwloc_obj_t home = hwloc_get_non_io_ancestor_obj(t, dev);
    f.gpu.numa_node = home ? FirstOr(home->nodeset, -1) : -1;
    found.push_back(std::move(f));
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.key < b.key; });
  for (Found& f : found) topo.gpus.push_back(std::move(f.gpu));
  return topo;
}

}  // namespace

Result<Topology> ReadHostTopology() {
  Result<TopologyPtr> t = NewTopology();
  if (!t.ok()) return t.status();
  if (hwloc_topology_load(t->get()) != 0) {
    return Status::FailedPrecondition("hwloc cannot read this machine's topology: " + Errno(errno));
  }
  Topology topo = Extract(t->get());
  // Only the real machine has an affinity to honour (HWLOC_XMLFILE may
  // stand in another one).
  if (hwloc_topology_is_thissystem(t->get())) {
    const int max_cpu = topo.cpus.empty() ? 0 : topo.cpus.back().id;
    Result<std::vector<int>> affinity = ProcessAffinity(max_cpu);
    if (!affinity.ok()) return affinity.status();
    std::vector<int> both;
    std::set_intersection(topo.allowed.begin(), topo.allowed.end(), affinity->begin(),
                          affinity->end(), std::back_inserter(both));
    topo.allowed = std::move(both);
  }
  return topo;
}

Result<Topology> ReadXmlTopology(const std::string& path) {
  Result<TopologyPtr> t = NewTopology();
  if (!t.ok()) return t.status();
  if (hwloc_topology_set_xml(t->get(), path.c_str()) != 0 || hwloc_topology_load(t->get()) != 0) {
    return Status::FailedPrecondition("hwloc cannot read the topology file " + path + ": " +
                                      Errno(errno));
  }
  return Extract(t->get());
}

Result<Topology> ReadSyntheticTopology(const std::string& description) {
  Result<TopologyPtr> t = NewTopology();
  if (!t.ok()) return t.status();
  if (hwloc_topology_set_synthetic(t->get(), description.c_str()) != 0 ||
      hwloc_topology_load(t->get()) != 0) {
    return Status::InvalidArgument("hwloc refuses the synthetic topology '" + description + "'");
  }
  return Extract(t->get());
}

}  // namespace ctrun::launcher
