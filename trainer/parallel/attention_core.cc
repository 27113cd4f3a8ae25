#include "trainer/parallel/attention_core.h"

#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>

#include "trainer/parallel/thread_cpu_clock.h"

namespace ctrun::trainer {
namespace {

std::atomic<int64_t> core_wall_nanos{0};
std::atomic<int64_t> core_cpu_nanos{0};

int64_t Nanos(double seconds) { return static_cast<int64_t>(seconds * 1e9); }

// Adds the wall and thread CPU time of its scope to the core's totals.
class CoreTimer {
 public:
  CoreTimer() : wall_(std::chrono::steady_clock::now()), cpu_(ThreadCpuSeconds()) {}
  ~CoreTimer() {
    core_cpu_nanos.fetch_add(Nanos(ThreadCpuSeconds() - cpu_));
    core_wall_nanos.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - wall_).count());
  }
  CoreTimer(const CoreTimer&) = delete;
  CoreTimer& operator=(const CoreTimer&) = delete;

 private:
  std::chrono::steady_clock::time_point wall_;
  double cpu_;
};

}  // namespace

std::vector<at::Tensor> AttentionCore(const std::vector<at::Tensor>& qkv) {
  CoreTimer timer;
  const at::Tensor &q = qkv[0], &k = qkv[1], &v = qkv[2];
  const int64_t seq = q.size(2);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(3)));
  at::Tensor future = at::ones({seq, seq}, at::TensorOptions().dtype(at::kBool).device(q.device())).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
  return {at::matmul(at::softmax(scores, -1), v)};
}

CoreTime AttentionCoreTime() {
  return {.wall_seconds = static_cast<double>(core_wall_nanos.load()) * 1e-9,
          .cpu_seconds = static_cast<double>(core_cpu_nanos.load()) * 1e-9};
}

}  // namespace ctrun::trainer
