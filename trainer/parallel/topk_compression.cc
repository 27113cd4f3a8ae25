#include "trainer/parallel/topk_compression.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace ctrun::trainer {
namespace {

std::string Number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

Status CheckTopkOptions(const TopkOptions& options) {
  if (!(options.density > 0 && options.density <= 1)) {
    return Status::InvalidArgument("--grad-compression topk:" + Number(options.density) +
                                   ": the density must be a number in (0, 1], e.g. topk:0.01");
  }
  if (!(options.momentum >= 0 && options.momentum < 1)) {
    return Status::InvalidArgument("--momentum " + Number(options.momentum) +
                                   ": top-k compression needs a momentum in [0, 1)");
  }
  if (options.warmup_steps < 0) {
    return Status::InvalidArgument("--topk-warmup-steps " + std::to_string(options.warmup_steps) +
                                   ": must be 0 or more");
  }
  if (!(options.clip_norm >= 0)) {
    return Status::InvalidArgument("--topk-clip " + Number(options.clip_norm) +
                                   ": must be 0 (no clipping) or more");
  }
  return Status::Ok();
}

int64_t TopkCount(int64_t numel, double density) {
  const auto k = static_cast<int64_t>(std::ceil(density * static_cast<double>(numel) - 1e-9));
  return std::clamp<int64_t>(k, 1, std::max<int64_t>(numel, 1));
}

at::Tensor SelectTopk(const at::Tensor& flat, int64_t k) {
  return std::get<1>(flat.abs().topk(k, /*dim=*/0, /*largest=*/true, /*sorted=*/false));
}

TopkBucket::TopkBucket(std::vector<int64_t> offsets, std::vector<int64_t> numels, int64_t total,
                       const at::TensorOptions& options, TopkOptions topk)
    : offsets_(std::move(offsets)), numels_(std::move(numels)), options_(topk) {
  if (options_.per_parameter) {
    for (int64_t numel : numels_) counts_.push_back(TopkCount(numel, options_.density));
  } else {
    counts_.push_back(TopkCount(total, options_.density));
  }
  for (int64_t count : counts_) message_count_ += count;
  u_ = at::zeros({total}, options.dtype(at::kFloat).requires_grad(false));
  v_ = at::zeros_like(u_);
}

// The top k of |source| over the bucket, or each slot's (slot order), as
// bucket indices (int64).
at::Tensor TopkBucket::SelectAll(const at::Tensor& source) const {
  if (!options_.per_parameter) return SelectTopk(source, counts_[0]);
  std::vector<at::Tensor> parts;
  for (size_t s = 0; s < offsets_.size(); ++s) {
    if (numels_[s] == 0) continue;
    parts.push_back(SelectTopk(source.narrow(0, offsets_[s], numels_[s]), counts_[s]).add_(offsets_[s]));
  }
  return at::cat(parts);
}

at::Tensor TopkBucket::Compress(at::Tensor& grad, int world) {
  at::NoGradGuard no_grad;
  if (options_.clip_norm > 0) {
    const double limit = options_.clip_norm / std::sqrt(static_cast<double>(world));
    for (size_t s = 0; s < offsets_.size(); ++s) {
      at::Tensor slot = grad.narrow(0, offsets_[s], numels_[s]);
      const double norm = slot.norm().item<double>();
      if (norm > limit) slot.mul_(limit / norm);
    }
  }
  at::Tensor indices, values;
  if (options_.error_feedback) {
    u_.mul_(options_.momentum).add_(grad);
    v_.add_(u_);
    indices = SelectAll(v_);
    values = v_.index_select(0, indices);
    v_.index_fill_(0, indices, 0);
    u_.index_fill_(0, indices, 0);
  } else {
    indices = SelectAll(grad);
    values = grad.index_select(0, indices);
  }
  at::Tensor message = at::empty({2 * message_count_}, grad.options().dtype(at::kInt));
  message.narrow(0, 0, message_count_).copy_(values.view(at::kInt));
  message.narrow(0, message_count_, message_count_).copy_(indices);
  return message;
}

void TopkBucket::Decompress(const at::Tensor& gathered, int world, at::Tensor& out) {
  at::NoGradGuard no_grad;
  at::Tensor rows = gathered.view({world, 2 * message_count_});
  at::Tensor values = rows.narrow(1, 0, message_count_).contiguous().view(at::kFloat).reshape({-1});
  at::Tensor indices = rows.narrow(1, message_count_, message_count_).reshape({-1}).to(at::kLong);
  out.zero_();
  out.index_add_(0, indices, values);
  if (world > 1) out.div_(world);
  if (!options_.error_feedback) DenseStep(out);
}

void TopkBucket::DenseStep(at::Tensor& mean) {
  at::NoGradGuard no_grad;
  u_.mul_(options_.momentum).add_(mean);
  mean.copy_(u_);
}

}  // namespace ctrun::trainer
