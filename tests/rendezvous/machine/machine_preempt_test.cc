// Preemption notices: the run's first one goes to every other node it
// holds, once; later ones are counted; the bounds a notice must meet.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "rendezvous/machine/machine.h"
#include "rendezvous/machine/preempt.h"
#include "tests/rendezvous/machine/script.h"

namespace ctrun::rdzv::testing {
namespace {

TEST_CASE("A preemption notice goes to every other node of the run, not to its sender") {
  Script s(Nodes(3, 4));
  s.Join("a");
  s.Join("b");
  s.Join("c");
  s.Run(seconds(31));  // the last call: round 0 runs with a b c
  CHECK(s.LastRound().members.size() == 3);
  CHECK(s.Join("d") == Lines{"RestartRequested r0 node_joined_wait_list cause=d [a b c]", "Admitted d waiting r1"});
  CHECK(s.Preempt("b", 20, "SIGUSR1") == Lines{"PreemptNotice from=b SIGUSR1 20s [a c d]"});
  const auto notice = std::get<PreemptNotice>(s.last().front());
  CHECK(notice.from == N("b"));
  CHECK(notice.remaining_s == 20);
  CHECK(notice.source == "SIGUSR1");
  REQUIRE(s.machine().Preempted().has_value());
  CHECK(s.machine().Preempted()->node == N("b"));
  CHECK(s.machine().Preempted()->notices == 1);
}

TEST_CASE("A run is noticed once: later notices are counted, not pushed again") {
  Script s(Nodes(2, 2));
  s.Join("a");
  s.Join("b");
  CHECK(s.Preempt("a", 30) == Lines{"PreemptNotice from=a SIGTERM 30s [b]"});
  CHECK(s.Preempt("b", 25, "SIGUSR1").empty());
  CHECK(s.Preempt("a", 10).empty());
  REQUIRE(s.machine().Preempted().has_value());
  CHECK(s.machine().Preempted()->node == N("a"));
  CHECK(s.machine().Preempted()->source == "SIGTERM");
  CHECK(s.machine().Preempted()->remaining_s == 30);
  CHECK(s.machine().Preempted()->notices == 3);
}

TEST_CASE("A notice changes no node and survives export and import") {
  Script s(Nodes(2, 2));
  s.Join("a");
  s.Join("b");
  const Snapshot before = s.State();
  s.Preempt("b", 5);
  CHECK(s.State() == before);
  Result<RendezvousMachine> copy = RendezvousMachine::Import(s.machine().Export());
  REQUIRE(copy.ok());
  CHECK(copy->Preempted() == s.machine().Preempted());
  CHECK(copy->Step(rdzv::Preempt{N("a"), 0, 5, "SIGTERM"}, TimePoint{}).empty());
  CHECK(copy->Preempted()->notices == 2);

  MachineState broken = s.machine().Export();
  broken.preempt->notices = 0;
  CHECK(RendezvousMachine::Import(broken).status().IsInvalidArgument());
}

TEST_CASE("A sender the run does not hold tells every node; a lone node tells none") {
  Script s(Nodes(1, 2));
  s.Join("a");
  CHECK(s.Preempt("stranger", 7) == Lines{"PreemptNotice from=stranger SIGTERM 7s [a]"});
  Script lone(Nodes(1, 1));
  lone.Join("a");
  CHECK(lone.Preempt("a", 7) == Lines{"PreemptNotice from=a SIGTERM 7s []"});
}

TEST_CASE("A closed run remembers the notice and pushes it to nobody") {
  Script s(Nodes(2, 2));
  s.Join("a");
  s.Join("b");
  s.Close();
  CHECK(s.Preempt("a", 7) == Lines{"PreemptNotice from=a SIGTERM 7s []"});
  CHECK(s.machine().Preempted().has_value());
}

TEST_CASE("A notice out of bounds is refused by CheckPreempt and ignored by the machine") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(CheckPreempt(20, "SIGTERM").ok());
  CHECK(CheckPreempt(kMaxPreemptRemainingS, std::string(64, 'x')).ok());
  CHECK(CheckPreempt(1e-3, "").ok());
  for (double bad : {0.0, -1.0, kMaxPreemptRemainingS * 1.001, inf, -inf, nan}) {
    INFO(bad);
    const Status st = CheckPreempt(bad, "SIGTERM");
    CHECK(st.IsInvalidArgument());
    CHECK(st.message().find("remaining_s") != std::string::npos);
    CHECK(st.message().find('\n') == std::string::npos);
  }
  for (const std::string& bad : {std::string(65, 'x'), std::string("SIG\nTERM"), std::string("SIG\x7f"),
                                 std::string("\xc3\xa9t\xc3\xa9")}) {
    const Status st = CheckPreempt(20, bad);
    CHECK(st.IsInvalidArgument());
    CHECK(st.message().find("source") != std::string::npos);
    CHECK(st.message().find('\n') == std::string::npos);
  }
  Script s(Nodes(2, 2));
  s.Join("a");
  s.Join("b");
  CHECK(s.Preempt("a", nan).empty());
  CHECK(s.Preempt("a", 20, std::string(65, 'x')).empty());
  CHECK_FALSE(s.machine().Preempted().has_value());
  CHECK(s.Preempt("a", 20) == Lines{"PreemptNotice from=a SIGTERM 20s [b]"});
}

}  // namespace
}  // namespace ctrun::rdzv::testing
