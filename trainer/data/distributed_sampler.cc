#include "trainer/data/distributed_sampler.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Functions.h>

#include <numeric>
#include <string>

namespace ctrun::trainer {

DistributedSampler::DistributedSampler(const SamplerOptions& options) : options_(options) {
  const int64_t n = options.dataset_size;
  const int64_t r = options.num_replicas;
  // PyTorch: drop_last and n % R != 0 -> ceil((n - R) / R), else ceil(n / R).
  num_samples_ = (options.drop_last && n % r != 0) ? (n - r + r - 1) / r : (n + r - 1) / r;
}

Result<DistributedSampler> DistributedSampler::Create(const SamplerOptions& options) {
  if (options.dataset_size < 1) {
    return Status::InvalidArgument("sampler: dataset size " + std::to_string(options.dataset_size) +
                                   " must be at least 1 (is the dataset empty?)");
  }
  if (options.num_replicas < 1 || options.rank < 0 || options.rank >= options.num_replicas) {
    return Status::InvalidArgument("sampler: rank " + std::to_string(options.rank) +
                                   " of " + std::to_string(options.num_replicas) +
                                   " replicas is invalid (need 0 <= rank < replicas)");
  }
  DistributedSampler sampler(options);
  if (sampler.num_samples_ < 1) {
    return Status::InvalidArgument("sampler: drop_last with " +
                                   std::to_string(options.dataset_size) + " samples on " +
                                   std::to_string(options.num_replicas) +
                                   " replicas leaves none per rank (use fewer ranks or no drop_last)");
  }
  return sampler;
}

std::vector<int64_t> DistributedSampler::EpochOrder(int64_t epoch) const {
  const int64_t n = options_.dataset_size;
  std::vector<int64_t> order(static_cast<size_t>(n));
  if (!options_.shuffle) {
    std::iota(order.begin(), order.end(), 0);
    return order;
  }
  // PyTorch: g = torch.Generator(); g.manual_seed(seed + epoch);
  // torch.randperm(n, generator=g).
  at::Generator generator =
      at::detail::createCPUGenerator(options_.seed + static_cast<uint64_t>(epoch));
  at::Tensor perm = at::randperm(n, generator, at::TensorOptions().dtype(at::kLong));
  const int64_t* data = perm.data_ptr<int64_t>();
  std::copy(data, data + n, order.begin());
  return order;
}

std::vector<int64_t> DistributedSampler::IndicesFrom(int64_t epoch, int64_t consumed) const {
  if (consumed >= options_.dataset_size) return {};
  std::vector<int64_t> order = EpochOrder(epoch);
  if (consumed > 0) order.erase(order.begin(), order.begin() + consumed);
  return ShardOrder(order, options_.num_replicas, options_.rank, options_.drop_last);
}

std::vector<int64_t> ShardOrder(const std::vector<int64_t>& order, int num_replicas, int rank,
                                bool drop_last) {
  const int64_t n = static_cast<int64_t>(order.size());
  const int64_t r = num_replicas;
  if (n == 0) return {};
  const int64_t per_rank = (drop_last && n % r != 0) ? (n - r + r - 1) / r : (n + r - 1) / r;
  const int64_t total = per_rank * r;
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(per_rank));
  for (int64_t pos = rank; pos < total; pos += r) {
    out.push_back(order[static_cast<size_t>(pos % n)]);  // padding wraps to the head
  }
  return out;
}

}  // namespace ctrun::trainer
