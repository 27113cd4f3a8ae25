#include "launcher/numa/placement.h"

#include <algorithm>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "tests/source_path.h"

namespace ctrun::launcher {
namespace {

const std::string kPlacementData = ctrun::testing::FromExeDir(CTRUN_NUMA_TEST_DATA).string();

Topology Xml(const std::string& name) {
  Result<Topology> t = ReadXmlTopology(kPlacementData + "/" + name);
  REQUIRE(t.ok());
  return std::move(*t);
}

std::vector<int> Range(int from, int to) {  // [from, to]
  std::vector<int> v;
  for (int i = from; i <= to; ++i) v.push_back(i);
  return v;
}

std::vector<int> Join(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  return a;
}

std::vector<Placement> Place(const Topology& t, NumaMode mode, int nproc,
                             std::optional<std::string> visible = std::nullopt) {
  Result<std::vector<int>> gpus = VisibleGpus(t, visible);
  REQUIRE(gpus.ok());
  Result<std::vector<Placement>> p = PlaceWorkers(t, *gpus, mode, nproc);
  INFO((p.ok() ? "" : p.status().message()));
  REQUIRE(p.ok());
  REQUIRE(static_cast<int>(p->size()) == nproc);
  return std::move(*p);
}

std::string PlaceError(const Topology& t, NumaMode mode, int nproc) {
  Result<std::vector<int>> gpus = VisibleGpus(t, std::nullopt);
  REQUIRE(gpus.ok());
  Result<std::vector<Placement>> p = PlaceWorkers(t, *gpus, mode, nproc);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().IsInvalidArgument());
  return p.status().message();
}

// Every placement: sorted, non-empty, allowed CPUs only; with `disjoint`,
// no CPU twice and, with `cover`, every allowed CPU once.
void CheckSets(const Topology& t, const std::vector<Placement>& ps, bool disjoint, bool cover) {
  const std::set<int> allowed(t.allowed.begin(), t.allowed.end());
  std::multiset<int> seen;
  for (const Placement& p : ps) {
    REQUIRE_FALSE(p.cpus.empty());
    CHECK(std::is_sorted(p.cpus.begin(), p.cpus.end()));
    for (int c : p.cpus) {
      CHECK(allowed.count(c) == 1);
      seen.insert(c);
    }
  }
  if (disjoint) CHECK(std::set<int>(seen.begin(), seen.end()).size() == seen.size());
  if (cover) CHECK(std::set<int>(seen.begin(), seen.end()) == allowed);
}

// The CPUs of NUMA node n in the SMT XML files: cores 8n..8n+7 and siblings.
std::vector<int> SmtNode(int n) { return Join(Range(8 * n, 8 * n + 7), Range(32 + 8 * n, 32 + 8 * n + 7)); }

TEST_CASE("Mode names are torch's") {
  for (const char* name : {"node", "socket", "exclusive", "core-complex"}) {
    std::optional<NumaMode> m = ParseNumaMode(name);
    REQUIRE(m);
    CHECK(std::string(NumaModeName(*m)) == name);
  }
  CHECK_FALSE(ParseNumaMode("gpu"));
  CHECK_FALSE(ParseNumaMode("Node"));
}

TEST_CASE("node: each rank gets every CPU of its GPU's NUMA node, memory preferred there") {
  for (const char* file : {"2s2n8c_smt_8gpu.xml", "2s2n8c_nosmt_8gpu.xml"}) {
    INFO(file);
    const Topology t = Xml(file);
    const bool smt = t.cpus.size() == 64;
    const auto ps = Place(t, NumaMode::kNode, 8);
    const std::vector<int> gpu_node = {0, 1, 0, 1, 2, 2, 3, 3};  // PCI order
    for (int r = 0; r < 8; ++r) {
      const int n = gpu_node[r];
      CHECK(ps[r].local_rank == r);
      CHECK(ps[r].gpu == r);
      CHECK(ps[r].numa_node == n);
      CHECK(ps[r].cpus == (smt ? SmtNode(n) : Range(8 * n, 8 * n + 7)));
      CHECK(ps[r].memory_nodes == std::vector<int>{n});
    }
    CHECK(ps[2].gpu_pci_bus_id == "0000:3a:00.0");
    CheckSets(t, ps, false, true);
  }
}

TEST_CASE("socket: every CPU of the GPU node's package, memory preferred on its nodes") {
  const Topology t = Xml("2s2n8c_smt_8gpu.xml");
  const auto ps = Place(t, NumaMode::kSocket, 8);
  CHECK(ps[0].cpus == Join(SmtNode(0), SmtNode(1)));
  CHECK(ps[0].memory_nodes == std::vector<int>{0, 1});
  CHECK(ps[3].cpus == ps[0].cpus);
  CHECK(ps[4].cpus == Join(SmtNode(2), SmtNode(3)));
  CHECK(ps[7].memory_nodes == std::vector<int>{2, 3});
}

TEST_CASE("exclusive: the GPUs of a node split its physical cores, siblings kept together") {
  SECTION("SMT on") {
    const Topology t = Xml("2s2n8c_smt_8gpu.xml");
    const auto ps = Place(t, NumaMode::kExclusive, 8);
    // Node 0 holds GPUs 0 and 2: cores 0-3 and 4-7, each with its sibling.
    CHECK(ps[0].cpus == Join(Range(0, 3), Range(32, 35)));
    CHECK(ps[2].cpus == Join(Range(4, 7), Range(36, 39)));
    CHECK(ps[1].cpus == Join(Range(8, 11), Range(40, 43)));
    CHECK(ps[7].cpus == Join(Range(28, 31), Range(60, 63)));
    CHECK(ps[7].memory_nodes == std::vector<int>{3});
    CheckSets(t, ps, true, true);
  }
  SECTION("SMT off") {
    const Topology t = Xml("2s2n8c_nosmt_8gpu.xml");
    const auto ps = Place(t, NumaMode::kExclusive, 8);
    CHECK(ps[0].cpus == Range(0, 3));
    CHECK(ps[2].cpus == Range(4, 7));
    CheckSets(t, ps, true, true);
  }
  SECTION("shares follow the GPUs on the node, not the workers started") {
    const Topology t = Xml("2s2n8c_nosmt_8gpu.xml");
    const auto ps = Place(t, NumaMode::kExclusive, 1);
    CHECK(ps[0].cpus == Range(0, 3));  // GPU 2 keeps its half of node 0
  }
  SECTION("cores that do not divide: the first GPUs get one more") {
    Topology t = Xml("2s2n8c_nosmt_8gpu.xml");
    t.allowed = Range(0, 6);  // node 0 keeps 7 cores; GPUs 0 and 2 share them
    const auto ps = Place(t, NumaMode::kExclusive, 1, std::string("0,2"));
    CHECK(ps[0].cpus == Range(0, 3));
    const auto both = Place(t, NumaMode::kExclusive, 2, std::string("0,2"));
    CHECK(both[1].cpus == Range(4, 6));
  }
}

TEST_CASE("core-complex: one L3 domain of the GPU's node each") {
  const Topology t = Xml("2s2n8c_smt_8gpu.xml");
  const auto ps = Place(t, NumaMode::kCoreComplex, 8);
  CHECK(ps[0].cpus == Join(Range(0, 3), Range(32, 35)));
  CHECK(ps[2].cpus == Join(Range(4, 7), Range(36, 39)));
  CHECK(ps[5].cpus == Join(Range(20, 23), Range(52, 55)));
  CHECK(ps[5].memory_nodes == std::vector<int>{2});
  CheckSets(t, ps, true, true);

  SECTION("more GPUs on a node than domains: they wrap around") {
    const Topology two = Xml("2s2n8c_smt_2gpu_node3.xml");
    Topology one_domain = two;
    // Only node 3's first L3 domain is allowed: both GPUs share it.
    one_domain.allowed = Join(Range(24, 27), Range(56, 59));
    const auto shared = Place(one_domain, NumaMode::kCoreComplex, 2);
    CHECK(shared[0].cpus == shared[1].cpus);
  }
  SECTION("the larger domain first") {
    Topology partial = Xml("2s2n8c_smt_2gpu_node3.xml");
    // Node 3: the first domain keeps 2 CPUs, the second all 8.
    partial.allowed = Join(Join(Range(24, 25), Range(28, 31)), Range(60, 63));
    const auto ps = Place(partial, NumaMode::kCoreComplex, 2);
    CHECK(ps[0].cpus == Join(Range(28, 31), Range(60, 63)));
    CHECK(ps[1].cpus == Range(24, 25));
  }
}

TEST_CASE("Two GPUs on one node: node shares it, exclusive splits it") {
  const Topology t = Xml("2s2n8c_smt_2gpu_node3.xml");
  const auto node = Place(t, NumaMode::kNode, 2);
  CHECK(node[0].cpus == SmtNode(3));
  CHECK(node[1].cpus == SmtNode(3));
  const auto excl = Place(t, NumaMode::kExclusive, 2);
  CHECK(excl[0].cpus == Join(Range(24, 27), Range(56, 59)));
  CHECK(excl[1].cpus == Join(Range(28, 31), Range(60, 63)));
  const auto sock = Place(t, NumaMode::kSocket, 2);
  CHECK(sock[0].cpus == Join(SmtNode(2), SmtNode(3)));
}

TEST_CASE("CUDA_VISIBLE_DEVICES picks and orders the GPUs as CUDA does") {
  const Topology t = Xml("2s2n8c_smt_8gpu.xml");
  auto visible = [&](std::optional<std::string> v) {
    Result<std::vector<int>> g = VisibleGpus(t, v);
    REQUIRE(g.ok());
    return *g;
  };
  CHECK(visible(std::nullopt) == Range(0, 7));
  CHECK(visible(std::string("")).empty());
  CHECK(visible(std::string("3,1")) == std::vector<int>{3, 1});
  CHECK(visible(std::string(" 2 , 5")) == std::vector<int>{2, 5});
  CHECK(visible(std::string("0,9,1")) == std::vector<int>{0});  // the list ends at a bad index
  CHECK(visible(std::string("-1,0")).empty());
  CHECK(visible(std::string("4,4,5")) == std::vector<int>{4});
  Result<std::vector<int>> uuid = VisibleGpus(t, std::string("GPU-8f6c1e1a,1"));
  REQUIRE_FALSE(uuid.ok());
  CHECK(uuid.status().message().find("GPU-8f6c1e1a") != std::string::npos);

  // Local rank 0 uses the first visible GPU: PCI 0000:ba:00.0, on node 3.
  const auto ps = Place(t, NumaMode::kExclusive, 2, std::string("6,7"));
  CHECK(ps[0].gpu == 0);
  CHECK(ps[0].gpu_pci_bus_id == "0000:ba:00.0");
  CHECK(ps[0].cpus == Join(Range(24, 27), Range(56, 59)));
  CHECK(ps[1].cpus == Join(Range(28, 31), Range(60, 63)));
}

TEST_CASE("Mixed GPU models without CUDA_DEVICE_ORDER=PCI_BUS_ID get a warning") {
  const Topology mixed = Xml("2s2n8c_smt_2gpu_node3_mixed.xml");
  const Topology same = Xml("2s2n8c_smt_2gpu_node3.xml");
  const std::vector<int> both = {0, 1};
  std::optional<std::string> w = GpuOrderWarning(mixed, both, std::nullopt);
  REQUIRE(w);
  CHECK(w->find("set CUDA_DEVICE_ORDER=PCI_BUS_ID") != std::string::npos);
  CHECK(GpuOrderWarning(mixed, both, std::string("FASTEST_FIRST")));
  CHECK_FALSE(GpuOrderWarning(mixed, both, std::string("PCI_BUS_ID")));
  CHECK_FALSE(GpuOrderWarning(mixed, {1}, std::nullopt));  // one model visible
  CHECK_FALSE(GpuOrderWarning(same, both, std::nullopt));
}

TEST_CASE("Without GPUs the ranks are spread over the NUMA nodes in blocks") {
  for (const std::string desc : {"pack:2 numa:2 l3:2 core:4 pu:2", "pack:2 numa:2 l3:2 core:4 pu:1"}) {
    INFO(desc);
    Result<Topology> synth = ReadSyntheticTopology(desc);
    REQUIRE(synth.ok());
    const Topology& t = *synth;
    for (int nproc : {1, 2, 3, 4, 5, 8, 16, 32}) {
      INFO("nproc " << nproc);
      const auto ps = Place(t, NumaMode::kExclusive, nproc);
      CheckSets(t, ps, true, nproc >= 4);  // every node has a rank from 4 on
      for (int r = 0; r < nproc; ++r) CHECK(ps[r].numa_node == r * 4 / nproc);
      CHECK(ps[0].gpu == -1);
    }
    const auto two = Place(t, NumaMode::kNode, 2);
    CHECK(two[0].numa_node == 0);
    CHECK(two[1].numa_node == 2);
    CheckSets(t, Place(t, NumaMode::kCoreComplex, 8), true, true);
    CheckSets(t, Place(t, NumaMode::kSocket, 2), true, true);
  }
  // The XML machine without GPUs, 2 ranks per node: halves of each node.
  const Topology x = Xml("2s2n8c_smt_nogpu.xml");
  const auto ps = Place(x, NumaMode::kExclusive, 8);
  CHECK(ps[1].cpus == Join(Range(4, 7), Range(36, 39)));
  CheckSets(x, ps, true, true);
}

TEST_CASE("Impossible bindings are refused, naming the fix") {
  SECTION("more exclusive workers than cores") {
    Result<Topology> t = ReadSyntheticTopology("numa:1 core:2 pu:2");
    REQUIRE(t.ok());
    const std::string msg = PlaceError(*t, NumaMode::kExclusive, 3);
    CHECK(msg.find("NUMA node 0 has 2 allowed physical cores for 3 workers") != std::string::npos);
    CHECK(msg.find("--nproc-per-node") != std::string::npos);
    // The same count fits when cores are not exclusive.
    CHECK(Place(*t, NumaMode::kNode, 3).size() == 3);
  }
  SECTION("more workers than GPUs") {
    const std::string msg = PlaceError(Xml("2s2n8c_smt_2gpu_node3.xml"), NumaMode::kNode, 3);
    CHECK(msg.find("set --nproc-per-node to at most 2") != std::string::npos);
  }
  SECTION("a GPU on a node where no CPU is allowed") {
    Topology t = Xml("2s2n8c_smt_8gpu.xml");
    t.allowed = {0, 1, 32, 33};
    const std::string msg = PlaceError(t, NumaMode::kNode, 2);
    CHECK(msg.find("GPU 1 (PCI 0000:2a:00.0) is on NUMA node 1") != std::string::npos);
    // Rank 0 alone fits: node 0 keeps 2 cores for its 2 GPUs.
    const auto one = Place(t, NumaMode::kExclusive, 1);
    CHECK(one[0].cpus == std::vector<int>{0, 32});
  }
  SECTION("no CPU at all") {
    Topology t = Xml("2s2n8c_smt_8gpu.xml");
    t.allowed.clear();
    CHECK(PlaceError(t, NumaMode::kNode, 1).find("no CPU") != std::string::npos);
  }
}

TEST_CASE("A GPU whose NUMA node is unknown counts as on the first node") {
  Topology t = Xml("2s2n8c_smt_2gpu_node3.xml");
  t.gpus[0].numa_node = -1;
  const auto ps = Place(t, NumaMode::kNode, 2);
  CHECK(ps[0].numa_node == 0);
  CHECK(ps[1].numa_node == 3);
}

TEST_CASE("Placements in words") {
  CHECK(FormatIdList({}) == "");
  CHECK(FormatIdList({5}) == "5");
  CHECK(FormatIdList({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  Placement p;
  p.gpu = 0;
  p.gpu_pci_bus_id = "0000:18:00.0";
  p.cpus = Join(Range(0, 7), Range(32, 39));
  p.memory_nodes = {0};
  CHECK(DescribePlacement(p, NumaMode::kNode) ==
        "CPUs 0-7,32-39, memory preferred on NUMA node 0 (--numa-binding node, GPU 0 at PCI 0000:18:00.0)");
  Placement q;
  q.cpus = {1};
  q.memory_nodes = {2, 3};
  CHECK(DescribePlacement(q, NumaMode::kSocket) ==
        "CPU 1, memory preferred on NUMA nodes 2-3 (--numa-binding socket, no GPU)");
  q.memory_nodes.clear();
  CHECK(DescribePlacement(q, NumaMode::kExclusive) ==
        "CPU 1, memory not bound (--numa-binding exclusive, no GPU)");
}

}  // namespace
}  // namespace ctrun::launcher
