// Machine state export/import, its bytes (machine_snapshot.h) and the
// --state-dir files (state_store.h).
#include "rendezvous/persist/state_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <catch2/catch.hpp>

#include "rendezvous/persist/machine_snapshot.h"
#include "tests/rendezvous/machine/script.h"

namespace ctrun::rdzv::testing {
namespace {

namespace fs = std::filesystem;

// A wall clock far from the steady clock's origin, as in real processes.
const ClockPair kThen{TimePoint{}, std::chrono::system_clock::time_point{} + std::chrono::hours(24 * 365 * 50)};

RendezvousMachine RoundTrip(const RendezvousMachine& m, ClockPair write, ClockPair read) {
  Result<StoredRun> run = DecodeRunState(EncodeRunState(StoredRun{"job", m.Export()}, write), read);
  REQUIRE(run.ok());
  CHECK(run->run_id == "job");
  Result<RendezvousMachine> back = RendezvousMachine::Import(run->state);
  INFO(back.status().message());
  REQUIRE(back.ok());
  return std::move(*back);
}

struct TempDir {
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "ctrun-state-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

TEST_CASE("A machine read back from its bytes answers every later event as the original") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    Params p = Nodes(2, 4);
    p.last_call_timeout = seconds(3);
    RendezvousMachine original = RendezvousMachine::Create(p).value();
    TimePoint now{};
    const char* names[] = {"a", "b", "c", "d", "e", "f"};
    for (int step = 0; step < 120; ++step) {
      now += milliseconds(rng() % 4000);
      const NodeId node = N(names[rng() % 6]);
      Event e = Tick{};
      switch (rng() % 6) {
        case 0: case 1: e = Join{node, 0, std::nullopt, 1 + static_cast<int>(rng() % 3), node.addr, 1}; break;
        case 2: e = KeepAlive{node, 0}; break;
        case 3: e = Leave{node, 0, rng() % 8 == 0 ? LeaveReason::kNormalExit : LeaveReason::kFailure}; break;
        case 4: e = Leave{node, 0, LeaveReason::kSignal}; break;
        default: break;
      }
      RendezvousMachine copy = RoundTrip(original, kThen, kThen);
      REQUIRE(copy.Export() == original.Export());
      std::vector<Decision> want = original.Step(e, now);
      std::vector<Decision> got = copy.Step(e, now);
      REQUIRE(got == want);
      REQUIRE(copy.NextDeadline() == original.NextDeadline());
    }
  }
}

TEST_CASE("Instants keep their wall-clock meaning in a process whose steady clock starts elsewhere") {
  Script s(Nodes(2, 2));
  s.Join("a");
  s.Jump(seconds(2));
  s.Join("b");
  const ClockPair later{kThen.steady + std::chrono::hours(7), kThen.wall};  // same instant, other origin
  RendezvousMachine back = RoundTrip(s.machine(), kThen, later);
  MachineState want = s.machine().Export();
  MachineState got = back.Export();
  REQUIRE(got.nodes.size() == 2);
  CHECK(got.nodes[1].last_seen - got.nodes[0].last_seen == seconds(2));
  CHECK(got.nodes[0].last_seen == want.nodes[0].last_seen + std::chrono::hours(7));
  CHECK(got.members == want.members);
}

TEST_CASE("Import refuses states that break the machine's invariants") {
  Script s(Nodes(2, 2));
  s.Join("a");
  s.Join("b");
  MachineState good = s.machine().Export();
  REQUIRE(good.complete);

  MachineState dup = good;
  dup.nodes.push_back(dup.nodes[0]);
  CHECK_THAT(RendezvousMachine::Import(dup).status().message(), Catch::Contains("appears twice"));

  MachineState no_table = good;
  no_table.members.pop_back();
  CHECK_THAT(RendezvousMachine::Import(no_table).status().message(), Catch::Contains("missing from the rank table"));

  MachineState forming = good;
  forming.complete = false;
  CHECK(RendezvousMachine::Import(forming).status().IsInvalidArgument());

  MachineState bad_params = good;
  bad_params.params.min_nodes = 3;
  CHECK_THAT(RendezvousMachine::Import(bad_params).status().message(), Catch::StartsWith("rendezvous state: "));

  CHECK(RendezvousMachine::Import(good).ok());
}

TEST_CASE("Bytes that are not a run state are refused") {
  CHECK_THAT(DecodeRunState("\xff\xff\xff", kThen).status().message(), Catch::Contains("does not parse"));
  CHECK_THAT(DecodeRunState("", kThen).status().message(), Catch::Contains("format 1"));
}

TEST_CASE("A restarted daemon gives every node a whole keep-alive timeout") {
  Script s(Nodes(2, 2));
  s.Join("a");
  s.Join("b");
  s.Close();
  s.Revive("a");
  MachineState state = s.machine().Export();
  REQUIRE(state.finishing.size() == 2);
  ForgiveOutage(state, s.At(seconds(100)));
  for (const auto& f : state.finishing) CHECK(f.last_seen == s.At(seconds(100)));
  Result<RendezvousMachine> back = RendezvousMachine::Import(state);
  INFO(back.status().message());
  REQUIRE(back.ok());
  CHECK(back->NextDeadline() == s.At(seconds(115)));
}

TEST_CASE("A running round survives a restart: nothing fires before the keep-alive timeout") {
  Script s(Nodes(2, 2));
  s.Join("a");
  s.Join("b");
  REQUIRE(s.State().complete);
  MachineState state = s.machine().Export();
  ForgiveOutage(state, s.At(seconds(60)));  // down for a minute: longer than 15 s of keep-alives
  RendezvousMachine back = RendezvousMachine::Import(state).value();
  CHECK(back.Step(KeepAlive{N("a"), 0}, s.At(seconds(61))).empty());
  CHECK(back.Step(KeepAlive{N("b"), 0}, s.At(seconds(62))).empty());
  CHECK(back.State().complete);
  CHECK(back.State().round == 0);
}

TEST_CASE("The store writes one file per run and reads every run back") {
  TempDir dir;
  StateStore store = StateStore::Open(dir.path + "/state").value();
  Script s(Nodes(1, 2));
  s.Join("a");
  REQUIRE(store.Save(StoredRun{"job/1.x", s.machine().Export()}, kThen).ok());
  REQUIRE(store.Save(StoredRun{"alpha", s.machine().Export()}, kThen).ok());
  s.Join("b");
  REQUIRE(store.Save(StoredRun{"job/1.x", s.machine().Export()}, kThen).ok());  // replaces
  CHECK(store.PathOf("job/1.x") == dir.path + "/state/job%2F1%2Ex.run");
  std::ofstream(dir.path + "/state/.job.tmp") << "torn";  // a write cut short
  Result<std::vector<StoredRun>> runs = store.LoadAll(kThen);
  REQUIRE(runs.ok());
  REQUIRE(runs->size() == 2);
  CHECK((*runs)[0].run_id == "alpha");
  CHECK((*runs)[1].run_id == "job/1.x");
  CHECK((*runs)[1].state == s.machine().Export());
}

TEST_CASE("The store names a file that is not a run state") {
  TempDir dir;
  StateStore store = StateStore::Open(dir.path).value();
  std::ofstream(dir.path + "/bad.run") << "not a state";
  Result<std::vector<StoredRun>> runs = store.LoadAll(kThen);
  REQUIRE(runs.status().IsInvalidArgument());
  CHECK_THAT(runs.status().message(), Catch::StartsWith("state file " + dir.path + "/bad.run: "));
  CHECK_THAT(runs.status().message(), Catch::EndsWith("(move it out of --state-dir to start without it)"));
}

TEST_CASE("The store refuses a path that is not a directory") {
  TempDir dir;
  std::ofstream(dir.path + "/file") << "x";
  Result<StateStore> store = StateStore::Open(dir.path + "/file");
  REQUIRE(store.status().code() == Status::Code::kIOError);
  CHECK_THAT(store.status().message(), Catch::Contains("not a directory"));
}

}  // namespace
}  // namespace ctrun::rdzv::testing
