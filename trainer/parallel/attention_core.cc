#include "trainer/parallel/attention_core.h"

#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

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

// The additive causal mask [S, S] (0 where key j <= query i, -inf above),
// made once per (S, device, dtype) and kept for the process's life (never
// destroyed: tensors may still be freed during static destruction).
at::Tensor CausalBias(int64_t seq, const at::TensorOptions& options) {
  using Key = std::tuple<int64_t, int, int, int>;
  static auto* mutex = new std::mutex;
  static auto* cache = new std::map<Key, at::Tensor>;
  const Key key{seq, static_cast<int>(options.device().type()), static_cast<int>(options.device().index()),
                static_cast<int>(options.dtype().toScalarType())};
  std::lock_guard<std::mutex> lock(*mutex);
  at::Tensor& bias = (*cache)[key];
  if (!bias.defined()) {
    at::NoGradGuard no_grad;
    bias = at::full({seq, seq}, -std::numeric_limits<double>::infinity(), options).triu_(1);
  }
  return bias;
}

}  // namespace

// One scaled, masked QK^T into one [B*heads, S, S] tensor (baddbmm: the mask
// added and the scale applied inside the product's own output), one softmax
// over it, one product with V: two [B*heads, S, S] tensors made, the
// probabilities the only one kept for backward.
std::vector<at::Tensor> AttentionCore(const std::vector<at::Tensor>& qkv) {
  CoreTimer timer;
  const at::Tensor &q = qkv[0], &k = qkv[1], &v = qkv[2];
  const int64_t batch = q.size(0), heads = q.size(1), seq = q.size(2), head_dim = q.size(3);
  const at::Tensor q3 = q.reshape({batch * heads, seq, head_dim});
  const at::Tensor k3 = k.reshape({batch * heads, seq, head_dim});
  const at::Tensor v3 = v.reshape({batch * heads, seq, head_dim});
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  at::Tensor scores = at::baddbmm(CausalBias(seq, q.options()), q3, k3.transpose(1, 2), /*beta=*/1, /*alpha=*/scale);
  return {at::bmm(at::softmax(scores, -1), v3).view({batch, heads, seq, head_dim})};
}

CoreTime AttentionCoreTime() {
  return {.wall_seconds = static_cast<double>(core_wall_nanos.load()) * 1e-9,
          .cpu_seconds = static_cast<double>(core_cpu_nanos.load()) * 1e-9};
}

}  // namespace ctrun::trainer
