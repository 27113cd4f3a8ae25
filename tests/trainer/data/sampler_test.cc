#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "trainer/data/distributed_sampler.h"

namespace ct = ctrun::trainer;

namespace {

ct::DistributedSampler Make(int64_t n, int replicas, int rank, bool drop_last = false,
                            bool shuffle = true) {
  ct::SamplerOptions options;
  options.dataset_size = n;
  options.num_replicas = replicas;
  options.rank = rank;
  options.seed = 11;
  options.drop_last = drop_last;
  options.shuffle = shuffle;
  auto sampler = ct::DistributedSampler::Create(options);
  REQUIRE(sampler.ok());
  return *sampler;
}

}  // namespace

TEST_CASE("ShardOrder pads from the head and strides by rank") {
  const std::vector<int64_t> order{5, 6, 7, 8, 9};
  CHECK(ct::ShardOrder(order, 3, 0, false) == std::vector<int64_t>{5, 8});
  CHECK(ct::ShardOrder(order, 3, 1, false) == std::vector<int64_t>{6, 9});
  CHECK(ct::ShardOrder(order, 3, 2, false) == std::vector<int64_t>{7, 5});
  CHECK(ct::ShardOrder(order, 3, 2, true) == std::vector<int64_t>{7});
  CHECK(ct::ShardOrder(order, 8, 7, false) == std::vector<int64_t>{7});
  CHECK(ct::ShardOrder({}, 2, 0, false).empty());
}

TEST_CASE("Sampler without shuffle is PyTorch's arange split") {
  auto sampler = Make(10, 4, 1, false, false);
  CHECK(sampler.num_samples() == 3);
  CHECK(sampler.Indices(0) == std::vector<int64_t>{1, 5, 9});
}

TEST_CASE("Sampler: each epoch is a permutation, and epochs differ") {
  std::multiset<int64_t> seen;
  for (int r = 0; r < 4; ++r) {
    auto list = Make(100, 4, r).Indices(3);
    seen.insert(list.begin(), list.end());
  }
  CHECK(seen.size() == 100);
  CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == 100);
  CHECK(Make(100, 4, 0).Indices(3) != Make(100, 4, 0).Indices(4));
}

TEST_CASE("Resume at another world size sees every remaining sample once") {
  // 2 ranks, batch 5, 3 steps: positions 0..29 consumed.
  const int64_t n = 97, consumed = 30;
  auto order = Make(n, 2, 0).EpochOrder(1);
  std::vector<int64_t> trained;
  for (int r = 0; r < 2; ++r) {
    auto list = Make(n, 2, r).Indices(1);
    trained.insert(trained.end(), list.begin(), list.begin() + 15);
  }
  std::sort(trained.begin(), trained.end());
  std::vector<int64_t> prefix(order.begin(), order.begin() + consumed);
  std::sort(prefix.begin(), prefix.end());
  REQUIRE(trained == prefix);  // the consumed positions are a prefix

  std::map<int64_t, int> count;
  for (int r = 0; r < 3; ++r) {
    for (int64_t index : Make(n, 3, r).IndicesFrom(1, consumed)) ++count[index];
  }
  for (int64_t index : prefix) CHECK(count.count(index) == 0);  // none seen twice
  for (size_t i = consumed; i < order.size(); ++i) CHECK(count[order[i]] >= 1);  // none skipped
  int64_t total = 0;
  for (auto& [index, c] : count) total += c;
  CHECK(total == 69);  // 67 remaining, padded to 3 x 23
}

TEST_CASE("IndicesFrom past the end of the epoch is empty") {
  CHECK(Make(10, 2, 0).IndicesFrom(0, 10).empty());
  CHECK(Make(10, 2, 0).IndicesFrom(0, 0) == Make(10, 2, 0).Indices(0));
}

TEST_CASE("Sampler rejects bad options in one line") {
  ct::SamplerOptions options;
  options.dataset_size = 0;
  auto empty = ct::DistributedSampler::Create(options);
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().message().find("dataset size 0") != std::string::npos);
  options.dataset_size = 10;
  options.num_replicas = 2;
  options.rank = 2;
  CHECK_FALSE(ct::DistributedSampler::Create(options).ok());
  options.rank = 0;
  options.num_replicas = 11;
  options.drop_last = true;
  auto none = ct::DistributedSampler::Create(options);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("leaves none per rank") != std::string::npos);
}
