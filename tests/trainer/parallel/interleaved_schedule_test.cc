// The interleaved (virtual-stage) 1F1B schedule against Megatron-LM's
// forward_backward_pipelining_with_interleaving (Narayanan et al. 2021,
// sec. 2.2), and a dependency simulation of all stages holding chunks
// s, s+p, ..., s+(v-1)p: it never deadlocks, and with equal costs it idles
// (p-1)/(v*m+p-1) of the step.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "trainer/parallel/pipeline_schedule.h"

namespace ct = ctrun::trainer;
using K = ct::PipeAction::Kind;

namespace {

constexpr auto kInterleaved = ct::PipeSchedule::kInterleaved;

std::string Text(int p, int stage, int m, int v) {
  return ct::ScheduleText(ct::StageSchedule(kInterleaved, p, stage, m, v));
}

// (stage, kind, micro-batch, chunk) of a pass that must finish before `a`
// starts on `stage`, besides the stage's own earlier passes: a forward needs
// the previous virtual stage's forward (stage s-1, same chunk; stage p-1,
// chunk c-1 for s = 0); a backward needs its own forward and the next
// virtual stage's backward (stage s+1, same chunk; stage 0, chunk c+1 for
// s = p-1). The first virtual stage's forward and the last's backward need
// nothing more.
using Key = std::tuple<int, int, int, int>;
std::vector<Key> Needs(const ct::PipeAction& a, int stage, int p, int v) {
  const int i = a.micro_batch, c = a.chunk;
  if (a.kind == K::kForward) {
    if (stage > 0) return {{stage - 1, 0, i, c}};
    if (c > 0) return {{p - 1, 0, i, c - 1}};
    return {};
  }
  std::vector<Key> needs = {{stage, 0, i, c}};
  if (stage < p - 1) needs.push_back({stage + 1, 1, i, c});
  else if (c < v - 1) needs.push_back({0, 1, i, c + 1});
  return needs;
}

// Runs every stage's list as a pipeline with blocking receives would; a
// chunk's forward costs tf and backward tb. Returns the time at which the
// last stage finishes, or -1 on deadlock.
double Simulate(int p, int m, int v, double tf, double tb) {
  std::vector<std::vector<ct::PipeAction>> lists;
  for (int stage = 0; stage < p; ++stage) lists.push_back(ct::StageSchedule(kInterleaved, p, stage, m, v));
  std::map<Key, double> done;  // -> end time
  std::vector<size_t> next(p, 0);
  std::vector<double> clock(p, 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int stage = 0; stage < p; ++stage) {
      if (next[stage] == lists[stage].size()) continue;
      const ct::PipeAction a = lists[stage][next[stage]];
      double ready = 0;
      bool blocked = false;
      for (const Key& need : Needs(a, stage, p, v)) {
        auto it = done.find(need);
        if (it == done.end()) blocked = true;
        else ready = std::max(ready, it->second);
      }
      if (blocked) continue;
      clock[stage] = std::max(ready, clock[stage]) + (a.kind == K::kForward ? tf : tb);
      done[{stage, a.kind == K::kForward ? 0 : 1, a.micro_batch, a.chunk}] = clock[stage];
      ++next[stage];
      progress = true;
    }
  }
  for (int stage = 0; stage < p; ++stage) {
    if (next[stage] != lists[stage].size()) return -1;
  }
  return *std::max_element(clock.begin(), clock.end());
}

// Megatron's warm-up forwards on `stage`.
int Warmup(int p, int stage, int m, int v) {
  if (m == p) return m * v;
  return std::min((p - stage - 1) * 2 + (v - 1) * p, m * v);
}

}  // namespace

TEST_CASE("Interleaved: each stage's order is Megatron's (p=2, v=2, m=4)") {
  // Stage 0 warms up with (2-0-1)*2 + (2-1)*2 = 4 forwards, stage 1 with 2.
  // Forwards go in groups of p=2 micro-batches per chunk, chunk 0 then 1;
  // backwards the same with chunk 1 then 0.
  CHECK(Text(2, 0, 4, 2) == "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  CHECK(Text(2, 1, 4, 2) == "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
}

TEST_CASE("Interleaved: with m == p every forward runs first, as in Megatron") {
  CHECK(Text(2, 1, 2, 2) == "F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0");
  CHECK(Text(2, 0, 2, 3) == "F0.0 F1.0 F0.1 F1.1 F0.2 F1.2 B0.2 B1.2 B0.1 B1.1 B0.0 B1.0");
}

TEST_CASE("Interleaved: every (micro-batch, chunk) runs forward then backward exactly once per stage") {
  for (int p : {1, 2, 4}) {
    for (int v : {1, 2, 3}) {
      for (int m : {p, 2 * p, 3 * p}) {
        for (int stage = 0; stage < p; ++stage) {
          const auto actions = ct::StageSchedule(kInterleaved, p, stage, m, v);
          CHECK(actions.size() == static_cast<size_t>(2 * m * v));
          std::set<std::pair<int, int>> forwarded, backwarded;
          for (const ct::PipeAction& a : actions) {
            REQUIRE(a.micro_batch >= 0);
            REQUIRE(a.micro_batch < m);
            REQUIRE(a.chunk >= 0);
            REQUIRE(a.chunk < v);
            const std::pair<int, int> pass{a.micro_batch, a.chunk};
            if (a.kind == K::kForward) {
              CHECK(forwarded.insert(pass).second);
            } else {
              CHECK(forwarded.count(pass) == 1);
              CHECK(backwarded.insert(pass).second);
            }
          }
          CHECK(forwarded.size() == static_cast<size_t>(m * v));
          CHECK(backwarded.size() == static_cast<size_t>(m * v));
        }
      }
    }
  }
}

TEST_CASE("Interleaved: all stages complete and idle (p-1)/(v*m+p-1) of the step with equal costs") {
  for (int p : {2, 4}) {
    for (int v : {2, 3}) {
      for (int m : {p, 2 * p, 3 * p}) {
        INFO("p=" << p << " v=" << v << " m=" << m);
        // A chunk is 1/v of a stage: forward 1/v, backward 2/v.
        const double makespan = Simulate(p, m, v, 1.0 / v, 2.0 / v);
        REQUIRE(makespan > 0);
        const double bubble = 1.0 - m * 3.0 / makespan;
        CHECK(bubble == Approx(ct::BubbleFraction(p, m, v)));
        CHECK(bubble < ct::BubbleFraction(p, m));
      }
    }
  }
}

TEST_CASE("Interleaved: a stage holds at most its warm-up + 1 (micro-batch, chunk) pairs, all p*v when m == p") {
  for (int p : {2, 4}) {
    for (int v : {2, 3}) {
      for (int m : {p, 2 * p, 3 * p}) {
        for (int stage = 0; stage < p; ++stage) {
          const int peak = ct::PeakInFlight(ct::StageSchedule(kInterleaved, p, stage, m, v));
          CHECK(peak == std::min(Warmup(p, stage, m, v) + 1, m * v));
          if (m == p) CHECK(peak == p * v);  // all forwards first
          else CHECK(peak <= (p - stage - 1) * 2 + (v - 1) * p + 1);
          CHECK(peak <= p * v + p - 1);  // stage 0's, the most of any stage
        }
      }
    }
  }
  // Stage 0 of p=4, v=2, m=8: 2*3 + 4 + 1 = 11 pairs of half a stage each.
  CHECK(ct::PeakInFlight(ct::StageSchedule(kInterleaved, 4, 0, 8, 2)) == 11);
}

TEST_CASE("Interleaved with one chunk per stage is 1F1B") {
  for (int p : {1, 2, 4}) {
    for (int m : {1, 3, 4, 8}) {
      for (int stage = 0; stage < p; ++stage) {
        REQUIRE(ct::CheckPipeSchedule(kInterleaved, p, m, 1).ok());
        const auto one_f_one_b = ct::StageSchedule(ct::PipeSchedule::k1F1B, p, stage, m);
        const bool same_with_v1 = ct::StageSchedule(kInterleaved, p, stage, m, 1) == one_f_one_b;
        const bool same_by_default = ct::StageSchedule(kInterleaved, p, stage, m) == one_f_one_b;
        CHECK(same_with_v1);
        CHECK(same_by_default);
        CHECK(Text(p, stage, m, 1) == ct::ScheduleText(one_f_one_b));
      }
    }
  }
  CHECK(Text(2, 0, 4, 1) == "F0 F1 B0 F2 B1 F3 B2 B3");
  CHECK(ct::BubbleFraction(4, 8, 1) == ct::BubbleFraction(4, 8));
}

TEST_CASE("The one-chunk schedules keep chunk 0 and their text") {
  for (auto s : {ct::PipeSchedule::k1F1B, ct::PipeSchedule::kGPipe}) {
    for (const ct::PipeAction& a : ct::StageSchedule(s, 4, 1, 8)) CHECK(a.chunk == 0);
  }
  CHECK(ct::ScheduleText({{K::kForward, 0}, {K::kBackward, 0}}) == "F0 B0");
  CHECK(ct::ScheduleText({{K::kForward, 0, 1}, {K::kBackward, 0, 0}}) == "F0.1 B0.0");
}

TEST_CASE("CheckPipeSchedule: one line naming the flags") {
  CHECK(ct::CheckPipeSchedule(kInterleaved, 4, 8, 2).ok());
  CHECK(ct::CheckPipeSchedule(kInterleaved, 4, 6, 1).ok());
  CHECK(ct::CheckPipeSchedule(ct::PipeSchedule::k1F1B, 4, 6, 1).ok());
  CHECK(ct::CheckPipeSchedule(kInterleaved, 4, 6, 2).message() ==
        "--micro-batches 6 is not a multiple of the pipeline's 4 stages, which --pp-schedule interleaved with "
        "--pp-virtual-stages 2 needs; use 4 or 8");
  CHECK(ct::CheckPipeSchedule(kInterleaved, 4, 2, 3).message() ==
        "--micro-batches 2 is not a multiple of the pipeline's 4 stages, which --pp-schedule interleaved with "
        "--pp-virtual-stages 3 needs; use 4");
  CHECK(ct::CheckPipeSchedule(ct::PipeSchedule::kGPipe, 4, 8, 2).message() ==
        "--pp-virtual-stages 2 needs --pp-schedule interleaved (gpipe runs one model chunk per stage)");
  CHECK(ct::CheckPipeSchedule(kInterleaved, 4, 8, 0).message() == "--pp-virtual-stages 0: must be at least 1");
}

TEST_CASE("ParsePipeSchedule: interleaved") {
  CHECK(*ct::ParsePipeSchedule("interleaved") == kInterleaved);
  CHECK(std::string(ct::PipeScheduleName(kInterleaved)) == "interleaved");
}
