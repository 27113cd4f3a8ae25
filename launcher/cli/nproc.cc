#include "launcher/cli/nproc.h"

#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "launcher/cli/text.h"

namespace ctrun::launcher {
namespace {

constexpr std::string_view kCgroupRoot = "/sys/fs/cgroup";
constexpr int kCudaErrorNoDevice = 100;

std::optional<long long> ParseLong(std::string_view s) {
  long long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

int CeilCpus(long long quota, long long period) {
  return static_cast<int>(std::max<long long>(1, (quota + period - 1) / period));
}

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    lines.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

// `dir` and each ancestor up to `root` (a quota on any of them applies).
std::vector<std::string> SelfAndAncestors(std::string_view root, std::string_view path) {
  std::vector<std::string> dirs;
  std::string p(path);
  while (!p.empty() && p.back() == '/') p.pop_back();
  for (;;) {
    dirs.push_back(std::string(root) + p);
    if (p.empty()) break;
    p.erase(p.rfind('/'));
  }
  return dirs;
}

void Cap(std::optional<int>& cap, const Result<std::optional<int>>& found) {
  if (found.ok() && *found && (!cap || **found < *cap)) cap = **found;
}

std::optional<int> CgroupCpuCap() {
  auto self = ReadFile("/proc/self/cgroup");
  if (!self) return std::nullopt;
  std::optional<int> cap;
  if (auto v2 = CgroupV2Path(*self)) {
    for (const std::string& dir : SelfAndAncestors(kCgroupRoot, *v2)) {
      if (auto text = ReadFile(dir + "/cpu.max")) Cap(cap, CpuCapFromCpuMax(*text));
    }
  }
  if (auto v1 = CgroupV1CpuPath(*self)) {
    for (std::string_view mount : {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"}) {
      for (const std::string& dir : SelfAndAncestors(mount, *v1)) {
        auto quota = ReadFile(dir + "/cpu.cfs_quota_us");
        auto period = ReadFile(dir + "/cpu.cfs_period_us");
        if (quota && period) Cap(cap, CpuCapFromCfs(*quota, *period));
      }
    }
  }
  return cap;
}

}  // namespace

int SystemProbe::UsableCpus() const {
  constexpr int kMaxCpus = 8192;
  int count = 0;
  cpu_set_t* set = CPU_ALLOC(kMaxCpus);
  size_t size = CPU_ALLOC_SIZE(kMaxCpus);
  if (set != nullptr && sched_getaffinity(0, size, set) == 0) count = CPU_COUNT_S(size, set);
  if (set != nullptr) CPU_FREE(set);
  if (count <= 0) count = 1;
  if (auto cap = CgroupCpuCap()) count = std::min(count, *cap);
  return std::max(count, 1);
}

Result<int> SystemProbe::VisibleGpus() const {
  // Never dlclose'd: unloading the CUDA driver library after cuInit is unsafe,
  // and the process needs it at most once.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return 0;
  using CuInit = int (*)(unsigned int);
  using CuDeviceGetCount = int (*)(int*);
  using CuGetErrorName = int (*)(int, const char**);
  auto cu_init = reinterpret_cast<CuInit>(dlsym(lib, "cuInit"));
  auto cu_count = reinterpret_cast<CuDeviceGetCount>(dlsym(lib, "cuDeviceGetCount"));
  auto cu_error_name = reinterpret_cast<CuGetErrorName>(dlsym(lib, "cuGetErrorName"));
  if (cu_init == nullptr || cu_count == nullptr) {
    return Status::Unavailable("libcuda.so.1 lacks cuInit or cuDeviceGetCount (reinstall the NVIDIA driver)");
  }
  auto fail = [&](std::string_view call, int code) {
    const char* name = nullptr;
    if (cu_error_name == nullptr || cu_error_name(code, &name) != 0 || name == nullptr) name = "unknown error";
    return Status::Unavailable(
        fmt::format("libcuda.so.1: {} failed with {} ({}) (check the NVIDIA driver with nvidia-smi)", call, name, code));
  };
  int rc = cu_init(0);
  if (rc == kCudaErrorNoDevice) return 0;
  if (rc != 0) return fail("cuInit", rc);
  int count = 0;
  rc = cu_count(&count);
  if (rc == kCudaErrorNoDevice) return 0;
  if (rc != 0) return fail("cuDeviceGetCount", rc);
  return count;
}

std::optional<std::string> SystemProbe::CudaVisibleDevices() const {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

Status ResolveNprocPerNode(LaunchConfig& config, const SystemProbe& probe) {
  switch (config.nproc_kind) {
    case NprocKind::kNumber:
      return Status::Ok();
    case NprocKind::kCpu:
      config.nproc_per_node = probe.UsableCpus();
      return Status::Ok();
    case NprocKind::kAuto: {
      auto gpus = probe.VisibleGpus();
      config.nproc_per_node = gpus.ok() && *gpus > 0 ? *gpus : probe.UsableCpus();
      return Status::Ok();
    }
    case NprocKind::kGpu: {
      auto gpus = probe.VisibleGpus();
      if (!gpus.ok()) {
        return Status::InvalidArgument(
            fmt::format("--nproc-per-node gpu: {}; use a number or cpu", gpus.status().message()));
      }
      if (*gpus <= 0) {
        auto visible = probe.CudaVisibleDevices();
        std::string shown = visible ? fmt::format("CUDA_VISIBLE_DEVICES={}", *visible) : "CUDA_VISIBLE_DEVICES unset";
        return Status::InvalidArgument(
            fmt::format("--nproc-per-node gpu: no NVIDIA GPU is visible ({}); use a number or cpu", shown));
      }
      config.nproc_per_node = *gpus;
      return Status::Ok();
    }
  }
  return Status::Internal("unknown NprocKind");
}

Result<std::optional<int>> CpuCapFromCpuMax(std::string_view text) {
  text = Trim(text);
  size_t space = text.find(' ');
  std::string_view quota = text.substr(0, space);
  std::string_view period = space == std::string_view::npos ? "100000" : Trim(text.substr(space + 1));
  auto p = ParseLong(period);
  if (!p || *p <= 0) {
    return Status::InvalidArgument(fmt::format("cpu.max '{}': period is not a positive integer", text));
  }
  if (quota == "max") return std::optional<int>();
  auto q = ParseLong(quota);
  if (!q || *q <= 0) {
    return Status::InvalidArgument(fmt::format("cpu.max '{}': quota is neither 'max' nor a positive integer", text));
  }
  return std::optional<int>(CeilCpus(*q, *p));
}

Result<std::optional<int>> CpuCapFromCfs(std::string_view quota_text, std::string_view period_text) {
  auto q = ParseLong(Trim(quota_text));
  auto p = ParseLong(Trim(period_text));
  if (!q || !p || *p <= 0 || *q == 0 || *q < -1) {
    return Status::InvalidArgument(fmt::format("cpu.cfs_quota_us '{}' / cpu.cfs_period_us '{}': not the kernel's format",
                                               Trim(quota_text), Trim(period_text)));
  }
  if (*q == -1) return std::optional<int>();
  return std::optional<int>(CeilCpus(*q, *p));
}

std::optional<std::string> CgroupV2Path(std::string_view proc_self_cgroup) {
  for (std::string_view line : Lines(proc_self_cgroup)) {
    if (line.rfind("0::", 0) == 0) return std::string(Trim(line.substr(3)));
  }
  return std::nullopt;
}

std::optional<std::string> CgroupV1CpuPath(std::string_view proc_self_cgroup) {
  for (std::string_view line : Lines(proc_self_cgroup)) {
    size_t first = line.find(':');
    size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    std::string_view controllers = line.substr(first + 1, second - first - 1);
    size_t start = 0;
    while (start <= controllers.size()) {
      size_t comma = controllers.find(',', start);
      std::string_view c = controllers.substr(start, comma == std::string_view::npos ? comma : comma - start);
      if (c == "cpu") return std::string(Trim(line.substr(second + 1)));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
  }
  return std::nullopt;
}

}  // namespace ctrun::launcher
