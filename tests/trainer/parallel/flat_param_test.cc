// Flat parameter layout, re-shard plans and the size-based wrap policy
// (torch-free parts of FSDP).
#include <catch2/catch.hpp>

#include <ostream>

#include "trainer/parallel/flat_param.h"
#include "trainer/parallel/wrap_policy.h"

namespace ct = ctrun::trainer;

// How a failed check prints a unit. Also needed to compile: this target
// reuses the trainer's precompiled <torch/torch.h>, whose glog makes every
// std::vector look printable to Catch, element by element.
namespace ctrun::trainer {
std::ostream& operator<<(std::ostream& out, const UnitSpan& unit) {
  return out << "[" << unit.begin << ", " << unit.end << ")";
}
}  // namespace ctrun::trainer

namespace {

ct::FlatLayout Layout(int world) {
  // 2x3 + 5 = 11 elements.
  return ct::MakeFlatLayout({{"w", {2, 3}, 0, 0}, {"b", {5}, 0, 0}}, world);
}

}  // namespace

TEST_CASE("flat layout pads to a multiple of the world size") {
  ct::FlatLayout layout = Layout(4);
  CHECK(layout.numel == 11);
  CHECK(layout.padded_numel == 12);
  CHECK(layout.shard_numel == 3);
  CHECK(layout.entries[1].offset == 6);
  CHECK(layout.entries[1].numel == 5);
  CHECK(layout.RealRange(3) == std::make_pair<int64_t, int64_t>(9, 11));
  CHECK(Layout(1).padded_numel == 11);
  CHECK(Layout(3).padded_numel == 12);
}

TEST_CASE("a rank holding only padding has an empty real range") {
  ct::FlatLayout layout = ct::MakeFlatLayout({{"b", {2}, 0, 0}}, 4);
  CHECK(layout.shard_numel == 1);
  auto [begin, end] = layout.RealRange(3);
  CHECK(begin == end);
}

TEST_CASE("re-shard plan reads each element once from the old owner") {
  // 11 elements, old world 4 (shards of 3), new rank range [4, 8).
  auto pieces = ct::ReshardPlan(11, 4, 8, 4);
  REQUIRE(pieces.size() == 2);
  CHECK(pieces[0].from_rank == 1);
  CHECK(pieces[0].begin == 4);
  CHECK(pieces[0].end == 6);
  CHECK(pieces[1].from_rank == 2);
  CHECK(pieces[1].begin == 6);
  CHECK(pieces[1].end == 8);
  // Every new layout covers the old one exactly, for 4 -> 2 -> 3.
  for (int old_world : {4, 2, 3}) {
    for (int world : {4, 2, 3}) {
      ct::FlatLayout layout = Layout(world);
      int64_t covered = 0;
      for (int r = 0; r < world; ++r) {
        auto [begin, end] = layout.RealRange(r);
        int64_t at = begin;
        for (const auto& piece : ct::ReshardPlan(11, begin, end, old_world)) {
          CHECK(piece.begin == at);
          const int64_t old_shard = (11 + old_world - 1) / old_world;
          CHECK(piece.begin >= piece.from_rank * old_shard);
          CHECK(piece.end <= (piece.from_rank + 1) * old_shard);
          at = piece.end;
        }
        CHECK(at == end);
        covered += end - begin;
      }
      CHECK(covered == 11);
    }
  }
}

TEST_CASE("size-based wrap closes a unit once it reaches the threshold") {
  auto units = ct::SizeBasedWrap({416, 12832, 65664, 1290}, 1000);
  REQUIRE(units.ok());
  // conv1 alone is too small: it joins conv2.
  CHECK(*units == std::vector<ct::UnitSpan>{{0, 2}, {2, 3}, {3, 4}});
  // A small tail joins the last unit.
  auto tail = ct::SizeBasedWrap({416, 12832, 65664, 1290}, 20000);
  REQUIRE(tail.ok());
  CHECK(*tail == std::vector<ct::UnitSpan>{{0, 4}});
  auto each = ct::SizeBasedWrap({416, 12832, 65664, 1290}, 1);
  REQUIRE(each.ok());
  CHECK(each->size() == 4);
  auto one = ct::SizeBasedWrap({10, 10}, 1000000);
  REQUIRE(one.ok());
  CHECK(*one == std::vector<ct::UnitSpan>{{0, 2}});
}

TEST_CASE("size-based wrap rejects bad input in one line") {
  CHECK(!ct::SizeBasedWrap({}, 10).ok());
  auto bad = ct::SizeBasedWrap({5}, 0);
  REQUIRE(!bad.ok());
  CHECK(bad.status().message() == "--min-unit-params 0: must be at least 1");
}
