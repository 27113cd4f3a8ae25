#include "trainer/ft/exact_average.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#include "trainer/ft/fixed_point.h"

namespace ctrun::trainer::ft {

ExactAverage::ExactAverage(std::vector<at::Tensor> params, int64_t shards)
    : params_(std::move(params)), shards_(shards) {
  for (const auto& param : params_) {
    offsets_.push_back(total_);
    total_ += param.numel();
  }
  hint_ = at::zeros({static_cast<int64_t>(params_.size())}, at::kFloat);
  step_max_.resize(params_.size());
}

void ExactAverage::Begin() { kept_ = 0; }

const float* ExactAverage::Shard(int k) const {
  return kept_values_.data() + static_cast<size_t>(k) * static_cast<size_t>(total_);
}

void ExactAverage::AddShard() {
  kept_values_.resize(static_cast<size_t>(kept_ + 1) * static_cast<size_t>(total_));
  at::Tensor flat = at::from_blob(kept_values_.data() + static_cast<size_t>(kept_) * static_cast<size_t>(total_),
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

void ExactAverage::Quantize(const std::vector<std::optional<int>>& shift) {
  std::fill(message_.begin(), message_.begin() + total_, 0);
  for (int k = 0; k < kept_; ++k) {
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!shift[i]) continue;  // a bucket of zeros: nothing to add
      AddFixedPoint(Shard(k) + offsets_[i], static_cast<size_t>(params_[i].numel()), *shift[i],
                    message_.data() + offsets_[i]);
    }
  }
}

// The first `count` int64s of message_ (the sums and the failure slot, and
// in the first sum the rest) summed over the quorum's groups by this local
// rank's ring, then over the group's ranks (Gloo): ring first, so every
// rank of the group makes the same Gloo calls whatever its ring did, and
// the failure slot tells them all whether some ring failed.
Result<bool> ExactAverage::Sum(Communicator& group, FtReplica& replica, std::size_t count) {
  message_[static_cast<size_t>(total_)] = 0;
  if (!replica.AllReduceSum(message_.data(), count)) message_[static_cast<size_t>(total_)] = 1;
  if (group.size() > 1) {
    at::Tensor t = at::from_blob(message_.data(), {static_cast<int64_t>(count)}, at::kLong);
    CTRUN_RETURN_IF_ERROR(WaitWork(group.AllReduceSum(t), "the group's sum of --ft-exact"));
  }
  return message_[static_cast<size_t>(total_)] == 0;
}

Result<bool> ExactAverage::Reduce(Communicator& group, FtReplica& replica, int participant) {
  const size_t buckets = params_.size();
  const size_t total = static_cast<size_t>(total_);
  // The sums, the failure slot, the misfit count, then S x buckets gathered maxima.
  message_.assign(total + 2 + static_cast<size_t>(shards_) * buckets, 0);
  int64_t& misfits = message_[total + 1];
  int64_t* slots = message_.data() + total + 2;
  // This rank's largest magnitudes, checked, in its own slots.
  std::vector<float> mine(buckets, 0.0f);
  for (int k = 0; k < kept_; ++k) {
    for (size_t i = 0; i < buckets; ++i) {
      const float m = MaxMagnitude(Shard(k) + offsets_[i], static_cast<size_t>(params_[i].numel()));
      auto finite = FixedPointShift(m, shards_);  // a NaN or infinity stops here
      if (!finite.ok()) return finite.status();
      mine[i] = std::max(mine[i], m);
    }
  }
  for (size_t i = 0; i < buckets; ++i) {
    slots[static_cast<size_t>(participant) * buckets + i] = std::bit_cast<uint32_t>(mine[i]);
  }
  // 1. The sum at the hint's shifts, unless some value does not fit them.
  std::vector<std::optional<int>> shift(buckets);
  const float* hint = hint_.data_ptr<float>();
  bool fits = true;
  for (size_t i = 0; i < buckets; ++i) {
    shift[i] = HintedShift(hint[i], shards_);
    fits = fits && FitsFixedPoint(mine[i], shift[i], shards_);
  }
  if (fits) {
    Quantize(shift);
  } else {
    misfits = 1;
  }
  auto summed = Sum(group, replica, message_.size());
  if (!summed.ok() || !*summed) return summed;
  // The quorum's largest magnitudes: the maximum of the gathered slots
  // (non-negative floats order as their bits do).
  for (size_t i = 0; i < buckets; ++i) {
    uint32_t most = 0;
    for (size_t p = 0; p < static_cast<size_t>(shards_); ++p) {
      most = std::max(most, static_cast<uint32_t>(slots[p * buckets + i]));
    }
    step_max_[i] = std::bit_cast<float>(most);
  }
  // 2. Some rank's values outgrew the hint: the sum again at the step's own shifts.
  if (misfits != 0) {
    ++second_sums_;
    for (size_t i = 0; i < buckets; ++i) {
      if (step_max_[i] == 0.0f) {
        shift[i] = std::nullopt;
        continue;
      }
      auto own = FixedPointShift(step_max_[i], shards_);
      if (!own.ok()) return own.status();
      shift[i] = *own;
    }
    Quantize(shift);
    summed = Sum(group, replica, total + 1);
    if (!summed.ok() || !*summed) return summed;
  }
  // 3. The mean, into .grad.
  at::NoGradGuard no_grad;
  std::vector<float> mean;
  for (size_t i = 0; i < buckets; ++i) {
    at::Tensor& param = params_[i];
    if (!param.grad().defined()) param.mutable_grad() = at::zeros_like(param);
    mean.assign(static_cast<size_t>(param.numel()), 0.0f);
    if (shift[i]) ReadFixedPointMean(message_.data() + offsets_[i], mean.size(), *shift[i], shards_, mean.data());
    param.mutable_grad().copy_(at::from_blob(mean.data(), param.sizes(), at::kFloat));
  }
  return true;
}

void ExactAverage::Commit() { std::memcpy(hint_.data_ptr<float>(), step_max_.data(), step_max_.size() * sizeof(float)); }

std::vector<HealTensor> ExactAverage::HealTensors() const {
  return {HealTensor{.name = "exact/hint", .tensor = hint_, .buffer = true}};
}

}  // namespace ctrun::trainer::ft
