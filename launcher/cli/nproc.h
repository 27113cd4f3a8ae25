// Resolving --nproc-per-node auto/cpu/gpu into a worker count.
//
// The machine is seen through SystemProbe so the decision is testable; the
// cgroup text parsers are pure functions for the same reason.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/status.h"
#include "launcher/cli/launch_config.h"

namespace ctrun::launcher {

// What the launcher may ask of the machine. The default methods are the real
// implementation; tests derive and override. Stateless; thread-safe.
struct SystemProbe {
  virtual ~SystemProbe() = default;

  // CPUs this process may run on: the sched_getaffinity count, capped by the
  // cgroup CPU quota (v2 cpu.max on this cgroup and its ancestors, or v1
  // cpu.cfs_quota_us / cpu.cfs_period_us), rounded up; at least 1.
  virtual int UsableCpus() const;

  // NVIDIA GPUs visible to this process, via the driver API loaded with
  // dlopen("libcuda.so.1") (cuInit + cuDeviceGetCount, which honour
  // CUDA_VISIBLE_DEVICES). 0 when libcuda is absent or reports no device.
  // Unavailable when the driver is present but fails to initialise (message
  // names the CUDA error).
  virtual Result<int> VisibleGpus() const;

  // The CUDA_VISIBLE_DEVICES value for error messages; nullopt when unset.
  virtual std::optional<std::string> CudaVisibleDevices() const;
};

// Sets config.nproc_per_node from config.nproc_kind and returns OK:
//  - kNumber: unchanged;
//  - kCpu: probe.UsableCpus();
//  - kGpu: probe.VisibleGpus(); InvalidArgument when it is 0 ("no NVIDIA GPU
//    is visible"), the probe's error when it fails;
//  - kAuto: the GPU count if > 0 (a GPU probe failure counts as 0), else
//    the CPU count.
Status ResolveNprocPerNode(LaunchConfig& config, const SystemProbe& probe);

// Pure parsers for the cgroup files. Each returns the CPU cap as a whole
// number of CPUs (ceil(quota / period), at least 1), nullopt for "no cap",
// or InvalidArgument for text that is not in the kernel's format.

// cgroup v2 cpu.max: "max 100000" (no cap) or "<quota> <period>".
Result<std::optional<int>> CpuCapFromCpuMax(std::string_view text);

// cgroup v1: cpu.cfs_quota_us ("-1" = no cap) and cpu.cfs_period_us.
Result<std::optional<int>> CpuCapFromCfs(std::string_view quota_text, std::string_view period_text);

// The cgroup v2 path ("/a/b") from /proc/self/cgroup text (the "0::" line),
// or nullopt when there is none (pure cgroup v1).
std::optional<std::string> CgroupV2Path(std::string_view proc_self_cgroup);

// The cgroup v1 path of the "cpu" controller from /proc/self/cgroup text, or
// nullopt when no line lists it.
std::optional<std::string> CgroupV1CpuPath(std::string_view proc_self_cgroup);

}  // namespace ctrun::launcher
