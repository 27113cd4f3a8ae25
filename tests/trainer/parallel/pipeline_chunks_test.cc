// The chunk bookkeeping of interleaved pipelines (pipeline_chunks.h):
// Megatron's assignment of virtual stages to (stage, chunk), the layers of
// each chunk, the wrap-around from the last stage to stage 0, and tags that
// no two messages of a step share, and messages between two ranks received
// in the order they were sent (what backends that ignore tags need).
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "trainer/parallel/pipeline_chunks.h"
#include "trainer/parallel/pipeline_schedule.h"

namespace ct = ctrun::trainer;

TEST_CASE("Chunk c of stage s is virtual stage c*p + s, and back") {
  CHECK(ct::VirtualStage(4, 0, 0) == 0);
  CHECK(ct::VirtualStage(4, 3, 0) == 3);
  CHECK(ct::VirtualStage(4, 0, 1) == 4);
  CHECK(ct::VirtualStage(4, 2, 1) == 6);
  for (int p : {1, 2, 4}) {
    for (int v : {1, 2, 3}) {
      std::set<int> seen;
      for (int s = 0; s < p; ++s) {
        for (int c = 0; c < v; ++c) {
          const int u = ct::VirtualStage(p, s, c);
          CHECK(seen.insert(u).second);
          CHECK(ct::ChunkOfVirtualStage(p, u) == ct::PipeChunk{s, c});
        }
      }
      CHECK(seen.size() == static_cast<size_t>(p * v));
      CHECK(*seen.rbegin() == p * v - 1);
    }
  }
}

TEST_CASE("The last stage's chunk c hands on to stage 0's chunk c+1") {
  const int p = 4;
  for (int c = 0; c < 2; ++c) {
    const int last = ct::VirtualStage(p, p - 1, c);
    CHECK(ct::ChunkOfVirtualStage(p, last + 1) == ct::PipeChunk{0, c + 1});
    CHECK(ct::ChunkOfVirtualStage(p, ct::VirtualStage(p, 0, c + 1) - 1) == ct::PipeChunk{p - 1, c});
  }
}

TEST_CASE("Chunk layers: 8 layers on p=4, v=2 give one a chunk, non-contiguous per stage") {
  for (int s = 0; s < 4; ++s) {
    const auto first = ct::ChunkLayers(8, 4, 2, s, 0);
    const auto second = ct::ChunkLayers(8, 4, 2, s, 1);
    CHECK(first == std::array<int, 2>{s, s + 1});
    CHECK(second == std::array<int, 2>{s + 4, s + 5});
  }
  // p=2, v=2: stage 0 holds blocks 0-1 and 4-5, stage 1 blocks 2-3 and 6-7.
  CHECK(ct::ChunkLayers(8, 2, 2, 0, 0) == std::array<int, 2>{0, 2});
  CHECK(ct::ChunkLayers(8, 2, 2, 0, 1) == std::array<int, 2>{4, 6});
  CHECK(ct::ChunkLayers(8, 2, 2, 1, 0) == std::array<int, 2>{2, 4});
  CHECK(ct::ChunkLayers(8, 2, 2, 1, 1) == std::array<int, 2>{6, 8});
  CHECK(ct::ChunkBlocksText(8, 2, 2, 0) == "0-1 + 4-5");
  CHECK(ct::ChunkBlocksText(8, 4, 2, 3) == "3-3 + 7-7");
  CHECK(ct::ChunkBlocksText(4, 2, 1, 1) == "2-3");
}

TEST_CASE("Chunk layers cover every layer once, in virtual-stage order") {
  for (int layers : {4, 8, 12, 7}) {
    for (int p : {1, 2, 4}) {
      for (int v : {1, 2, 3}) {
        if (p * v > layers) continue;
        int next = 0;
        for (int u = 0; u < p * v; ++u) {
          const ct::PipeChunk at = ct::ChunkOfVirtualStage(p, u);
          const auto range = ct::ChunkLayers(layers, p, v, at.stage, at.chunk);
          CHECK(range[0] == next);
          CHECK(range[1] > range[0]);
          next = range[1];
        }
        CHECK(next == layers);
      }
    }
  }
}

TEST_CASE("Tags: every activation and gradient of a step has its own, non-negative") {
  for (int p : {1, 2, 4}) {
    for (int v : {1, 2, 3}) {
      const int total = p * v;
      for (int m : {1, 4, 8}) {
        std::set<int> tags;
        size_t messages = 0;
        for (int i = 0; i < m; ++i) {
          for (int boundary = 0; boundary + 1 < total; ++boundary) {
            const int a = ct::ActivationTag(i, boundary, total), g = ct::GradientTag(i, boundary, total);
            CHECK(a >= 0);
            CHECK(tags.insert(a).second);
            CHECK(tags.insert(g).second);
            messages += 2;
          }
        }
        CHECK(tags.size() == messages);
      }
    }
  }
}

namespace {

// The tags of the messages each ordered pair of ranks exchanges in a step,
// in the order the sender posts them and in the order the receiver waits
// for them, when every stage runs its interleaved schedule.
using Pair = std::pair<int, int>;
struct Traffic {
  std::map<Pair, std::vector<int>> sent, received;
};

Traffic StepTraffic(int p, int v, int m) {
  Traffic t;
  const int total = p * v;
  for (int s = 0; s < p; ++s) {
    for (const ct::PipeAction& a : ct::StageSchedule(ct::PipeSchedule::kInterleaved, p, s, m, v)) {
      const int u = ct::VirtualStage(p, s, a.chunk);
      auto rank = [&](int w) { return ct::ChunkOfVirtualStage(p, w).stage; };
      if (a.kind == ct::PipeAction::Kind::kForward) {
        if (u > 0) t.received[{rank(u - 1), s}].push_back(ct::ActivationTag(a.micro_batch, u - 1, total));
        if (u < total - 1) t.sent[{s, rank(u + 1)}].push_back(ct::ActivationTag(a.micro_batch, u, total));
      } else {
        if (u < total - 1) t.received[{rank(u + 1), s}].push_back(ct::GradientTag(a.micro_batch, u, total));
        if (u > 0) t.sent[{s, rank(u - 1)}].push_back(ct::GradientTag(a.micro_batch, u - 1, total));
      }
    }
  }
  return t;
}

}  // namespace

TEST_CASE("Between any two ranks, messages are received in the order they are sent") {
  for (int p : {2, 4}) {
    for (int v : {1, 2, 3}) {
      for (int m : {p, 2 * p, 3 * p}) {
        INFO("p=" << p << " v=" << v << " m=" << m);
        const Traffic t = StepTraffic(p, v, m);
        CHECK(t.sent == t.received);
        size_t messages = 0;
        for (const auto& [pair, tags] : t.sent) messages += tags.size();
        CHECK(messages == static_cast<size_t>(2 * m * (p * v - 1)));
      }
    }
  }
}
