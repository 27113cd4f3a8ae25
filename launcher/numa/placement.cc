#include "launcher/numa/placement.h"

#include <algorithm>
#include <map>
#include <set>

namespace ctrun::launcher {
namespace {

std::string Plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// The allowed CPUs of each NUMA node, by node; nodes without any are absent.
std::map<int, std::vector<int>> AllowedByNode(const Topology& t) {
  const std::set<int> allowed(t.allowed.begin(), t.allowed.end());
  std::map<int, std::vector<int>> by_node;
  for (const Cpu& c : t.cpus) {
    if (allowed.count(c.id)) by_node[c.numa_node].push_back(c.id);
  }
  return by_node;
}

const Cpu* FindCpu(const Topology& t, int id) {
  auto it = std::lower_bound(t.cpus.begin(), t.cpus.end(), id,
                             [](const Cpu& c, int v) { return c.id < v; });
  return it != t.cpus.end() && it->id == id ? &*it : nullptr;
}

// Groups `cpus` by `key` (core or cache of each), keys ascending.
template <typename Key>
std::vector<std::vector<int>> GroupBy(const Topology& t, const std::vector<int>& cpus, Key key) {
  std::map<int, std::vector<int>> groups;
  for (int id : cpus) groups[key(*FindCpu(t, id))].push_back(id);
  std::vector<std::vector<int>> out;
  for (auto& [k, ids] : groups) out.push_back(std::move(ids));
  return out;
}

// One worker's seat: the node it sits on, and its position among the
// sharers of that node (the visible GPUs there, or the CPU-only ranks).
struct Seat {
  int node = 0;
  int index_on_node = 0;
  int sharers_on_node = 1;
  std::string sharers_name;  // "GPUs" or "workers", for messages
};

Result<std::vector<int>> Cpus(const Topology& t, const std::map<int, std::vector<int>>& by_node,
                              NumaMode mode, const Seat& seat, std::vector<int>* mem_nodes) {
  const std::vector<int>& node_cpus = by_node.at(seat.node);
  *mem_nodes = {seat.node};
  switch (mode) {
    case NumaMode::kNode:
      return node_cpus;
    case NumaMode::kSocket: {
      // As torch: a node's package is the package of its smallest allowed CPU.
      auto package_of = [&](int node) { return FindCpu(t, by_node.at(node).front())->package; };
      const int package = package_of(seat.node);
      std::vector<int> cpus;
      mem_nodes->clear();
      for (const auto& [node, ids] : by_node) {
        if (package_of(node) != package) continue;
        mem_nodes->push_back(node);
        cpus.insert(cpus.end(), ids.begin(), ids.end());
      }
      std::sort(cpus.begin(), cpus.end());
      return cpus;
    }
    case NumaMode::kExclusive: {
      const auto cores = GroupBy(t, node_cpus, [](const Cpu& c) { return c.core; });
      const int n = seat.sharers_on_node;
      const int per = static_cast<int>(cores.size()) / n;
      const int extra = static_cast<int>(cores.size()) % n;
      if (per < 1) {
        return Status::InvalidArgument(
            "--numa-binding exclusive: NUMA node " + std::to_string(seat.node) + " has " +
            Plural(cores.size(), "allowed physical core", "allowed physical cores") + " for " +
            std::to_string(n) + " " + seat.sharers_name +
            ", and each needs a core of its own: use --numa-binding node, or fewer workers "
            "per node (--nproc-per-node)");
      }
      const int i = seat.index_on_node;
      const int begin = i * per + std::min(i, extra);
      const int end = begin + per + (i < extra ? 1 : 0);
      std::vector<int> cpus;
      for (int k = begin; k < end; ++k) cpus.insert(cpus.end(), cores[k].begin(), cores[k].end());
      std::sort(cpus.begin(), cpus.end());
      return cpus;
    }
    case NumaMode::kCoreComplex: {
      auto domains = GroupBy(t, node_cpus, [](const Cpu& c) { return c.cache; });
      std::stable_sort(domains.begin(), domains.end(), [](const auto& a, const auto& b) {
        return a.size() != b.size() ? a.size() > b.size() : a.front() < b.front();
      });
      return domains[seat.index_on_node % domains.size()];
    }
  }
  return Status::Internal("unknown NUMA mode");
}

}  // namespace

std::optional<NumaMode> ParseNumaMode(std::string_view name) {
  if (name == "node") return NumaMode::kNode;
  if (name == "socket") return NumaMode::kSocket;
  if (name == "exclusive") return NumaMode::kExclusive;
  if (name == "core-complex") return NumaMode::kCoreComplex;
  return std::nullopt;
}

const char* NumaModeName(NumaMode mode) {
  switch (mode) {
    case NumaMode::kNode: return "node";
    case NumaMode::kSocket: return "socket";
    case NumaMode::kExclusive: return "exclusive";
    case NumaMode::kCoreComplex: return "core-complex";
  }
  return "?";
}

Result<std::vector<int>> VisibleGpus(const Topology& topology,
                                     const std::optional<std::string>& cuda_visible_devices) {
  const int count = static_cast<int>(topology.gpus.size());
  std::vector<int> visible;
  if (!cuda_visible_devices) {
    for (int i = 0; i < count; ++i) visible.push_back(i);
    return visible;
  }
  const std::string& v = *cuda_visible_devices;
  size_t pos = 0;
  while (pos <= v.size()) {
    size_t comma = v.find(',', pos);
    if (comma == std::string::npos) comma = v.size();
    std::string entry = v.substr(pos, comma - pos);
    entry.erase(0, entry.find_first_not_of(" \t"));
    entry.erase(entry.find_last_not_of(" \t") + 1);
    if (entry.empty()) break;  // as CUDA: the list ends at an empty entry
    const size_t digits = entry[0] == '-' ? 1 : 0;
    const bool numeric = entry.size() > digits &&
                         entry.find_first_not_of("0123456789", digits) == std::string::npos;
    if (!numeric) {
      return Status::InvalidArgument(
          "--numa-binding: CUDA_VISIBLE_DEVICES='" + v + "' names device '" + entry +
          "', which ctrun cannot map to a PCI device without CUDA: list device indices "
          "(with CUDA_DEVICE_ORDER=PCI_BUS_ID), or drop --numa-binding");
    }
    if (entry[0] == '-' || entry.size() > 6) break;  // CUDA stops at an invalid index
    const int index = std::stoi(entry);
    if (index >= count || std::find(visible.begin(), visible.end(), index) != visible.end()) break;
    visible.push_back(index);
    pos = comma + 1;
  }
  return visible;
}

std::optional<std::string> GpuOrderWarning(const Topology& topology,
                                           const std::vector<int>& visible_gpus,
                                           const std::optional<std::string>& cuda_device_order) {
  if (cuda_device_order && *cuda_device_order == "PCI_BUS_ID") return std::nullopt;
  std::set<int> models;
  for (int g : visible_gpus) models.insert(topology.gpus[g].device_id);
  if (models.size() < 2) return std::nullopt;
  return std::string(
      "--numa-binding: the GPUs are of different models, and CUDA numbers them fastest first "
      "unless CUDA_DEVICE_ORDER=PCI_BUS_ID; ctrun binds local rank i near the i-th GPU in PCI "
      "bus id order: set CUDA_DEVICE_ORDER=PCI_BUS_ID so that the two agree");
}

Result<std::vector<Placement>> PlaceWorkers(const Topology& topology,
                                            const std::vector<int>& visible_gpus, NumaMode mode,
                                            int nproc) {
  const std::map<int, std::vector<int>> by_node = AllowedByNode(topology);
  if (by_node.empty()) {
    return Status::InvalidArgument(
        "--numa-binding: hwloc reports no CPU this process may run on; drop --numa-binding");
  }
  const int gpus = static_cast<int>(visible_gpus.size());
  if (gpus > 0 && nproc > gpus) {
    return Status::InvalidArgument(
        "--numa-binding: local rank " + std::to_string(gpus) + " has no GPU to be bound near (" +
        Plural(gpus, "GPU is", "GPUs are") + " visible, for " + std::to_string(nproc) +
        " workers): set --nproc-per-node to at most " + std::to_string(gpus) +
        ", or drop --numa-binding");
  }

  // The node of each sharer: the visible GPUs, or else the local ranks.
  std::vector<int> sharer_node;
  if (gpus > 0) {
    for (int g = 0; g < gpus; ++g) {
      const Gpu& gpu = topology.gpus[visible_gpus[g]];
      int node = gpu.numa_node < 0 ? by_node.begin()->first : gpu.numa_node;
      if (!by_node.count(node)) {
        if (g >= nproc) {  // no worker of ours uses it: it only takes its share
          sharer_node.push_back(node);
          continue;
        }
        return Status::InvalidArgument(
            "--numa-binding: GPU " + std::to_string(g) + " (PCI " + gpu.pci_bus_id +
            ") is on NUMA node " + std::to_string(node) +
            ", where ctrun may not run on any CPU (allowed: " + FormatIdList(topology.allowed) +
            "): run ctrun with CPUs of that node allowed, or drop --numa-binding");
      }
      sharer_node.push_back(node);
    }
  } else {
    std::vector<int> nodes;
    for (const auto& [node, ids] : by_node) nodes.push_back(node);
    const int64_t n = static_cast<int64_t>(nodes.size());
    for (int r = 0; r < nproc; ++r) sharer_node.push_back(nodes[r * n / nproc]);
  }

  std::vector<Placement> out;
  for (int r = 0; r < nproc; ++r) {
    Seat seat;
    seat.node = sharer_node[r];
    seat.sharers_name = gpus > 0 ? "GPUs" : "workers";
    seat.sharers_on_node = 0;
    for (size_t s = 0; s < sharer_node.size(); ++s) {
      if (sharer_node[s] != seat.node) continue;
      if (static_cast<int>(s) < r) ++seat.index_on_node;
      ++seat.sharers_on_node;
    }
    Placement p;
    p.local_rank = r;
    p.numa_node = seat.node;
    if (gpus > 0) {
      p.gpu = r;
      p.gpu_pci_bus_id = topology.gpus[visible_gpus[r]].pci_bus_id;
    }
    Result<std::vector<int>> cpus = Cpus(topology, by_node, mode, seat, &p.memory_nodes);
    if (!cpus.ok()) return cpus.status();
    p.cpus = std::move(*cpus);
    out.push_back(std::move(p));
  }
  return out;
}

std::string FormatIdList(const std::vector<int>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ids[i]);
    if (j > i) out += '-' + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

std::string DescribePlacement(const Placement& p, NumaMode mode) {
  std::string s = (p.cpus.size() == 1 ? "CPU " : "CPUs ") + FormatIdList(p.cpus) + ", ";
  if (p.memory_nodes.empty()) {
    s += "memory not bound";
  } else {
    s += std::string("memory preferred on NUMA ") + (p.memory_nodes.size() == 1 ? "node " : "nodes ") +
         FormatIdList(p.memory_nodes);
  }
  s += std::string(" (--numa-binding ") + NumaModeName(mode) + ", ";
  s += p.gpu >= 0 ? "GPU " + std::to_string(p.gpu) + " at PCI " + p.gpu_pci_bus_id : "no GPU";
  return s + ")";
}

}  // namespace ctrun::launcher
