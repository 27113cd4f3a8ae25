// Pipeline schedules against the textbook (Narayanan et al. 2021, fig. 4;
// Megatron-LM's forward_backward_pipelining_without_interleaving), and a
// small dependency simulation of all stages: the schedules never deadlock,
// and with equal per-micro-batch costs both idle (p-1)/(m+p-1) of the step.
#include <catch2/catch.hpp>

#include <map>

#include "trainer/parallel/pipeline_schedule.h"

namespace ct = ctrun::trainer;
using K = ct::PipeAction::Kind;

namespace {

std::string Text(ct::PipeSchedule s, int p, int stage, int m) {
  return ct::ScheduleText(ct::StageSchedule(s, p, stage, m));
}

// Runs every stage's list as a real pipeline would: F(i) on stage s needs
// F(i) on s-1 done, B(i) on s needs B(i) on s+1 done (the last stage's B(i)
// needs its own F(i)). Forward costs `tf`, backward `tb`. Returns the time
// at which the last stage finishes, or -1 on deadlock; `busy` gets each
// stage's compute time.
double Simulate(ct::PipeSchedule s, int p, int m, double tf, double tb) {
  std::vector<std::vector<ct::PipeAction>> lists;
  for (int stage = 0; stage < p; ++stage) lists.push_back(ct::StageSchedule(s, p, stage, m));
  std::map<std::tuple<int, int, int>, double> done;  // (stage, kind, micro) -> end time
  std::vector<size_t> next(p, 0);
  std::vector<double> clock(p, 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int stage = 0; stage < p; ++stage) {
      if (next[stage] == lists[stage].size()) continue;
      const ct::PipeAction a = lists[stage][next[stage]];
      std::tuple<int, int, int> dep;
      if (a.kind == K::kForward) {
        if (stage == 0) dep = {-1, 0, 0};
        else dep = {stage - 1, 0, a.micro_batch};
      } else {
        dep = stage == p - 1 ? std::make_tuple(stage, 0, a.micro_batch) : std::make_tuple(stage + 1, 1, a.micro_batch);
      }
      double ready = 0;
      if (std::get<0>(dep) >= 0) {
        auto it = done.find(dep);
        if (it == done.end()) continue;
        ready = it->second;
      }
      const double start = std::max(ready, clock[stage]);
      clock[stage] = start + (a.kind == K::kForward ? tf : tb);
      done[{stage, a.kind == K::kForward ? 0 : 1, a.micro_batch}] = clock[stage];
      ++next[stage];
      progress = true;
    }
  }
  for (int stage = 0; stage < p; ++stage) {
    if (next[stage] != lists[stage].size()) return -1;
  }
  return *std::max_element(clock.begin(), clock.end());
}

}  // namespace

TEST_CASE("1F1B: each stage's order is the textbook one (p=4, m=8)") {
  CHECK(Text(ct::PipeSchedule::k1F1B, 4, 0, 8) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  CHECK(Text(ct::PipeSchedule::k1F1B, 4, 1, 8) == "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
  CHECK(Text(ct::PipeSchedule::k1F1B, 4, 2, 8) == "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7");
  CHECK(Text(ct::PipeSchedule::k1F1B, 4, 3, 8) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
}

TEST_CASE("1F1B: fewer micro-batches than stages warm up with all of them") {
  CHECK(Text(ct::PipeSchedule::k1F1B, 4, 0, 2) == "F0 F1 B0 B1");
  CHECK(Text(ct::PipeSchedule::k1F1B, 4, 2, 2) == "F0 F1 B0 B1");
  CHECK(Text(ct::PipeSchedule::k1F1B, 4, 3, 2) == "F0 B0 F1 B1");
  CHECK(Text(ct::PipeSchedule::k1F1B, 1, 0, 3) == "F0 B0 F1 B1 F2 B2");
}

TEST_CASE("GPipe: all forwards, then all backwards") {
  CHECK(Text(ct::PipeSchedule::kGPipe, 2, 0, 4) == "F0 F1 F2 F3 B0 B1 B2 B3");
  CHECK(Text(ct::PipeSchedule::kGPipe, 2, 1, 4) == "F0 F1 F2 F3 B0 B1 B2 B3");
}

TEST_CASE("Activations held: 1F1B at most p - stage, GPipe all m") {
  for (int stage = 0; stage < 4; ++stage) {
    CHECK(ct::PeakInFlight(ct::StageSchedule(ct::PipeSchedule::k1F1B, 4, stage, 8)) == 4 - stage);
    CHECK(ct::PeakInFlight(ct::StageSchedule(ct::PipeSchedule::kGPipe, 4, stage, 8)) == 8);
  }
}

TEST_CASE("Both schedules complete and idle (p-1)/(m+p-1) of the step with equal costs") {
  for (auto s : {ct::PipeSchedule::k1F1B, ct::PipeSchedule::kGPipe}) {
    for (int p : {1, 2, 4}) {
      for (int m : {1, 3, 8}) {
        const double makespan = Simulate(s, p, m, 1.0, 2.0);
        REQUIRE(makespan > 0);
        const double bubble = 1.0 - m * 3.0 / makespan;
        CHECK(bubble == Approx(ct::BubbleFraction(p, m)));
      }
    }
  }
}

TEST_CASE("ParsePipeSchedule") {
  CHECK(*ct::ParsePipeSchedule("1f1b") == ct::PipeSchedule::k1F1B);
  CHECK(*ct::ParsePipeSchedule("gpipe") == ct::PipeSchedule::kGPipe);
  CHECK(ct::ParsePipeSchedule("zb").status().message() ==
        "--pp-schedule 'zb': unknown (use 1f1b, gpipe or interleaved)");
}
