#include "launcher/numa/topology.h"

#include <sched.h>

#include <algorithm>
#include <string>

#include <catch2/catch.hpp>

#include "tests/source_path.h"

namespace ctrun::launcher {
namespace {

const std::string kData = ctrun::testing::FromExeDir(CTRUN_NUMA_TEST_DATA).string();

const Cpu& CpuOf(const Topology& t, int id) {
  auto it = std::find_if(t.cpus.begin(), t.cpus.end(), [&](const Cpu& c) { return c.id == id; });
  REQUIRE(it != t.cpus.end());
  return *it;
}

TEST_CASE("An XML topology with SMT: cores, caches, nodes and packages of each CPU") {
  Result<Topology> t = ReadXmlTopology(kData + "/2s2n8c_smt_8gpu.xml");
  REQUIRE(t.ok());
  REQUIRE(t->cpus.size() == 64);
  CHECK(t->allowed.size() == 64);
  // Linux numbering: CPU c and c + 32 are one core's two threads.
  CHECK(CpuOf(*t, 0).core == 0);
  CHECK(CpuOf(*t, 32).core == 0);
  CHECK(CpuOf(*t, 45).core == 13);
  // Two L3 domains of 4 cores per NUMA node, named by their smallest CPU.
  CHECK(CpuOf(*t, 3).cache == 0);
  CHECK(CpuOf(*t, 36).cache == 4);
  CHECK(CpuOf(*t, 12).cache == 12);
  CHECK(CpuOf(*t, 12).numa_node == 1);
  CHECK(CpuOf(*t, 44).numa_node == 1);
  CHECK(CpuOf(*t, 15).package == 0);
  CHECK(CpuOf(*t, 16).numa_node == 2);
  CHECK(CpuOf(*t, 16).package == 1);
  CHECK(CpuOf(*t, 63).numa_node == 3);
}

TEST_CASE("GPUs are NVIDIA display/3D controllers, in PCI bus id order, with their NUMA node") {
  Result<Topology> t = ReadXmlTopology(kData + "/2s2n8c_smt_8gpu.xml");
  REQUIRE(t.ok());
  std::vector<std::string> ids;
  std::vector<int> nodes;
  for (const Gpu& g : t->gpus) {
    ids.push_back(g.pci_bus_id);
    nodes.push_back(g.numa_node);
  }
  // Not the ASPEED VGA (0000:03) nor the NVSwitch (class 0x0680, 0000:a0).
  CHECK(ids == std::vector<std::string>{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0",
                                        "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0",
                                        "0000:ba:00.0", "0000:db:00.0"});
  CHECK(nodes == std::vector<int>{0, 1, 0, 1, 2, 2, 3, 3});
}

TEST_CASE("Each GPU's PCI device id tells its model") {
  Result<Topology> t = ReadXmlTopology(kData + "/2s2n8c_smt_2gpu_node3_mixed.xml");
  REQUIRE(t.ok());
  REQUIRE(t->gpus.size() == 2);
  CHECK(t->gpus[0].device_id == 0x2330);
  CHECK(t->gpus[1].device_id == 0x26b9);
}

TEST_CASE("An XML topology without SMT: each CPU is its own core") {
  Result<Topology> t = ReadXmlTopology(kData + "/2s2n8c_nosmt_8gpu.xml");
  REQUIRE(t.ok());
  REQUIRE(t->cpus.size() == 32);
  for (const Cpu& c : t->cpus) CHECK(c.core == c.id);
  CHECK(t->gpus.size() == 8);
}

TEST_CASE("A synthetic topology has no GPUs") {
  Result<Topology> t = ReadSyntheticTopology("pack:2 numa:2 l3:2 core:4 pu:2");
  REQUIRE(t.ok());
  CHECK(t->cpus.size() == 64);
  CHECK(t->gpus.empty());
  // hwloc numbers synthetic threads one core after the other.
  CHECK(CpuOf(*t, 1).core == 0);
  CHECK(CpuOf(*t, 9).cache == 8);
  CHECK(CpuOf(*t, 17).numa_node == 1);
  CHECK(CpuOf(*t, 33).package == 1);
}

TEST_CASE("A topology hwloc cannot read is an error naming it") {
  Result<Topology> missing = ReadXmlTopology(kData + "/no-such-file.xml");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("no-such-file.xml") != std::string::npos);
  Result<Topology> bad = ReadSyntheticTopology("pack:two");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("pack:two") != std::string::npos);
}

TEST_CASE("This machine: the allowed CPUs are the ones this process may run on") {
  Result<Topology> t = ReadHostTopology();
  REQUIRE(t.ok());
  REQUIRE_FALSE(t->allowed.empty());
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(::sched_getaffinity(0, sizeof(set), &set) == 0);
  CHECK(static_cast<int>(t->allowed.size()) == CPU_COUNT(&set));
  for (int id : t->allowed) CHECK(CPU_ISSET(id, &set));
}

}  // namespace
}  // namespace ctrun::launcher
