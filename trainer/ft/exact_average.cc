#include "trainer/ft/exact_average.h"

#include <algorithm>
#include <utility>

#include "trainer/ft/fixed_point.h"

namespace ctrun::trainer::ft {

ExactAverage::ExactAverage(std::vector<at::Tensor> params) : params_(std::move(params)) {
  for (const auto& param : params_) {
    offsets_.push_back(total_);
    total_ += param.numel();
  }
  max_.resize(params_.size());
  shift_.resize(params_.size());
  sums_.resize(static_cast<size_t>(total_));
}

void ExactAverage::Begin() { kept_ = 0; }

void ExactAverage::AddShard() {
  shards_.resize(static_cast<size_t>(kept_ + 1) * static_cast<size_t>(total_));
  at::Tensor flat = at::from_blob(shards_.data() + static_cast<size_t>(kept_) * static_cast<size_t>(total_),
                                  {total_}, at::kFloat);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor slot = flat.narrow(0, offsets_[i], params_[i].numel());
    const at::Tensor& grad = params_[i].grad();
    if (grad.defined()) {
      slot.copy_(grad.detach().reshape({-1}));
    } else {
      slot.zero_();
    }
  }
  ++kept_;
}

Result<bool> ExactAverage::Reduce(Communicator& group, FtReplica& replica, int64_t shards) {
  // 1. Each bucket's largest magnitude over every shard of the quorum.
  std::fill(max_.begin(), max_.end(), 0.0f);
  for (int k = 0; k < kept_; ++k) {
    const float* shard = shards_.data() + static_cast<size_t>(k) * static_cast<size_t>(total_);
    for (size_t i = 0; i < params_.size(); ++i) {
      const float m = MaxMagnitude(shard + offsets_[i], static_cast<size_t>(params_[i].numel()));
      auto checked = FixedPointShift(m, shards);  // a NaN or infinity stops here, before it is compared
      if (!checked.ok()) return checked.status();
      max_[i] = std::max(max_[i], m);
    }
  }
  if (group.size() > 1) {
    at::Tensor t = at::from_blob(max_.data(), {static_cast<int64_t>(max_.size())}, at::kFloat);
    CTRUN_RETURN_IF_ERROR(WaitWork(group.AllReduceMax(t), "the group's maximum of --ft-exact"));
  }
  if (!replica.AllReduceMax(max_.data(), max_.size())) return false;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto shift = FixedPointShift(max_[i], shards);
    if (!shift.ok()) return shift.status();
    shift_[i] = *shift;
  }
  // 2. The fixed-point sum of every shard.
  std::fill(sums_.begin(), sums_.end(), 0);
  for (int k = 0; k < kept_; ++k) {
    const float* shard = shards_.data() + static_cast<size_t>(k) * static_cast<size_t>(total_);
    for (size_t i = 0; i < params_.size(); ++i) {
      AddFixedPoint(shard + offsets_[i], static_cast<size_t>(params_[i].numel()), shift_[i],
                    sums_.data() + offsets_[i]);
    }
  }
  if (group.size() > 1) {
    at::Tensor t = at::from_blob(sums_.data(), {total_}, at::kLong);
    CTRUN_RETURN_IF_ERROR(WaitWork(group.AllReduceSum(t), "the group's sum of --ft-exact"));
  }
  if (!replica.AllReduceSum(sums_.data(), sums_.size())) return false;
  // 3. The mean, into .grad.
  at::NoGradGuard no_grad;
  std::vector<float> mean;
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor& param = params_[i];
    if (!param.grad().defined()) param.mutable_grad() = at::zeros_like(param);
    mean.resize(static_cast<size_t>(param.numel()));
    ReadFixedPointMean(sums_.data() + offsets_[i], mean.size(), shift_[i], shards, mean.data());
    param.mutable_grad().copy_(at::from_blob(mean.data(), param.sizes(), at::kFloat));
  }
  return true;
}

}  // namespace ctrun::trainer::ft
