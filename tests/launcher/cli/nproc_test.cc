#include "launcher/cli/nproc.h"

#include <catch2/catch.hpp>

namespace ctrun::launcher {
namespace {

struct FakeProbe : SystemProbe {
  int cpus = 6;
  Result<int> gpus = 0;
  std::optional<std::string> visible;
  int UsableCpus() const override { return cpus; }
  Result<int> VisibleGpus() const override { return gpus; }
  std::optional<std::string> CudaVisibleDevices() const override { return visible; }
};

LaunchConfig WithKind(NprocKind kind, int n = 1) {
  LaunchConfig c;
  c.nproc_kind = kind;
  c.nproc_per_node = n;
  return c;
}

TEST_CASE("a number is kept and cpu takes the CPU count", "[nproc]") {
  FakeProbe probe;
  LaunchConfig c = WithKind(NprocKind::kNumber, 3);
  REQUIRE(ResolveNprocPerNode(c, probe).ok());
  CHECK(c.nproc_per_node == 3);
  c = WithKind(NprocKind::kCpu);
  probe.gpus = 8;
  REQUIRE(ResolveNprocPerNode(c, probe).ok());
  CHECK(c.nproc_per_node == 6);
}

TEST_CASE("auto takes GPUs when there are some and CPUs otherwise", "[nproc]") {
  FakeProbe probe;
  probe.gpus = 2;
  LaunchConfig c = WithKind(NprocKind::kAuto);
  REQUIRE(ResolveNprocPerNode(c, probe).ok());
  CHECK(c.nproc_per_node == 2);
  probe.gpus = 0;
  REQUIRE(ResolveNprocPerNode(c, probe).ok());
  CHECK(c.nproc_per_node == 6);
  probe.gpus = Status::Unavailable("driver broken");
  REQUIRE(ResolveNprocPerNode(c, probe).ok());
  CHECK(c.nproc_per_node == 6);
}

TEST_CASE("gpu takes the GPU count and fails clearly without GPUs", "[nproc]") {
  FakeProbe probe;
  probe.gpus = 4;
  LaunchConfig c = WithKind(NprocKind::kGpu);
  REQUIRE(ResolveNprocPerNode(c, probe).ok());
  CHECK(c.nproc_per_node == 4);

  probe.gpus = 0;
  probe.visible = "";
  Status s = ResolveNprocPerNode(c, probe);
  CHECK(s.IsInvalidArgument());
  CHECK(s.message() == "--nproc-per-node gpu: no NVIDIA GPU is visible (CUDA_VISIBLE_DEVICES=); use a number or cpu");
  probe.visible.reset();
  CHECK_THAT(ResolveNprocPerNode(c, probe).message(), Catch::Contains("(CUDA_VISIBLE_DEVICES unset)"));

  probe.gpus = Status::Unavailable("libcuda.so.1: cuInit failed with CUDA_ERROR_X (999)");
  s = ResolveNprocPerNode(c, probe);
  CHECK(s.IsInvalidArgument());
  CHECK(s.message() == "--nproc-per-node gpu: libcuda.so.1: cuInit failed with CUDA_ERROR_X (999); use a number or cpu");
}

TEST_CASE("cgroup v2 cpu.max parsing", "[nproc]") {
  auto cap = [](std::string_view text) {
    auto r = CpuCapFromCpuMax(text);
    REQUIRE(r.ok());
    return *r;
  };
  CHECK(cap("max 100000\n") == std::nullopt);
  CHECK(cap("max") == std::nullopt);
  CHECK(cap("200000 100000\n") == 2);
  CHECK(cap("150000 100000") == 2);   // rounded up
  CHECK(cap("50000 100000") == 1);    // at least 1
  CHECK(cap("1 100000") == 1);
  CHECK(cap("400000 50000") == 8);
  for (std::string_view bad : {"", "abc 100000", "100000 0", "100000 x", "-5 100000", "0 100000"}) {
    INFO(bad);
    auto r = CpuCapFromCpuMax(bad);
    CHECK_FALSE(r.ok());
    CHECK(r.status().IsInvalidArgument());
  }
}

TEST_CASE("cgroup v1 cfs quota parsing", "[nproc]") {
  auto r = CpuCapFromCfs("-1\n", "100000\n");
  REQUIRE(r.ok());
  CHECK(*r == std::nullopt);
  r = CpuCapFromCfs("250000", "100000");
  REQUIRE(r.ok());
  CHECK(*r == 3);
  CHECK_FALSE(CpuCapFromCfs("abc", "100000").ok());
  CHECK_FALSE(CpuCapFromCfs("100000", "0").ok());
  CHECK_FALSE(CpuCapFromCfs("-2", "100000").ok());
}

TEST_CASE("cgroup paths from /proc/self/cgroup", "[nproc]") {
  const std::string hybrid =
      "9:name=systemd:/\n4:memory:/job/42\n2:cpuacct,cpu:/job/42\n1:cpuset:/\n0::/user.slice/x.scope\n";
  CHECK(CgroupV2Path(hybrid) == "/user.slice/x.scope");
  CHECK(CgroupV1CpuPath(hybrid) == "/job/42");
  CHECK(CgroupV2Path("0::/\n") == "/");
  CHECK(CgroupV1CpuPath("0::/\n") == std::nullopt);
  CHECK(CgroupV2Path("3:cpu:/a\n") == std::nullopt);
  CHECK(CgroupV1CpuPath("3:cpuacct:/a\n3:cpu,cpuacct:/b") == "/b");
}

TEST_CASE("the real probe answers sanely on this machine", "[nproc]") {
  SystemProbe probe;
  CHECK(probe.UsableCpus() >= 1);
  auto gpus = probe.VisibleGpus();
  if (gpus.ok()) CHECK(*gpus >= 0);
}

}  // namespace
}  // namespace ctrun::launcher
