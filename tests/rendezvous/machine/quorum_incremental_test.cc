// QuorumMachine keeps its counts incrementally (O(log N) per input): on
// random event sequences it decides exactly as the scanning reference
// (quorum_reference.h) does: the same quorums, reasons, deadlines and
// waiting groups after every input.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "rendezvous/machine/quorum.h"
#include "tests/rendezvous/machine/quorum_reference.h"

namespace ctrun::rdzv {
namespace {

using std::chrono::milliseconds;

struct QuorumPair {
  QuorumMachine fast;
  reference::ReferenceQuorum slow;
  std::set<std::string> pinned;  // the reference heartbeats these before each Tick
};

// One random sequence of `events` inputs over `groups` groups; every Tick's
// outcome and reason, and (without pins) every deadline, compared.
void RunQuorumSequence(uint32_t seed, int groups, int events, bool pins, bool time_back) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  const QuorumParams params{.min_replicas = 1 + pick(3), .max_replicas = 2 + pick(groups),
                            .join_timeout = milliseconds(300 + pick(400)),
                            .heartbeat_timeout = milliseconds(200 + pick(400))};
  QuorumPair p{QuorumMachine(params), reference::ReferenceQuorum(params), {}};
  TimePoint now{};
  for (int e = 0; e < events; ++e) {
    INFO("seed " << seed << " event " << e);
    now += milliseconds(pick(4) == 0 ? 0 : pick(120));
    if (time_back && pick(50) == 0) now -= milliseconds(pick(200));
    const std::string id = "g" + std::to_string(pick(groups));
    switch (pick(pins ? 8 : 7)) {
      case 0:
      case 1:
      case 2: {
        const QuorumMember m{.id = id, .step = pick(4), .address = id + ":1", .commit_failures = pick(6) == 0 ? 1 : 0};
        p.fast.Request(m, now);
        p.slow.Request(m, now);
        break;
      }
      case 3:
        p.fast.Heartbeat(id, now);
        p.slow.Heartbeat(id, now);
        break;
      case 4:
        if (pick(3) == 0) {
          p.fast.Lost(id, now);
          p.slow.Lost(id, now);
          p.pinned.erase(id);
        } else {
          const TimePoint until = now + milliseconds(pick(500));
          p.fast.Bench(id, until);
          p.slow.Bench(id, until);
        }
        break;
      case 7: {
        const bool on = pick(2) == 0;
        p.fast.Pin(id, on, now);
        if (on ? p.pinned.insert(id).second : p.pinned.erase(id) > 0) p.slow.Heartbeat(id, now);
        break;
      }
      default:
        break;  // a Tick only
    }
    for (const std::string& g : p.pinned) p.slow.Heartbeat(g, now);
    const std::optional<Quorum> fast = p.fast.Tick(now), slow = p.slow.Tick(now);
    REQUIRE(fast == slow);
    REQUIRE(p.fast.reason() == p.slow.reason());
    REQUIRE(p.fast.Waiting() == p.slow.Waiting());
    REQUIRE(p.fast.last() == p.slow.last());
    if (!pins) REQUIRE(p.fast.NextDeadline(now) == p.slow.NextDeadline(now));
  }
}

TEST_CASE("QuorumMachine: the incremental counts decide as the scanning reference, on random sequences") {
  for (uint32_t seed = 1; seed <= 150; ++seed) RunQuorumSequence(seed, 2 + static_cast<int>(seed % 9), 400, false, false);
}

TEST_CASE("QuorumMachine: pinned groups (watched) decide as groups heartbeating before every Tick") {
  for (uint32_t seed = 1000; seed < 1150; ++seed) RunQuorumSequence(seed, 2 + static_cast<int>(seed % 9), 400, true, false);
}

TEST_CASE("QuorumMachine: a Tick at an earlier instant recounts and decides as the reference") {
  for (uint32_t seed = 2000; seed < 2100; ++seed) RunQuorumSequence(seed, 3 + static_cast<int>(seed % 6), 400, false, true);
}

}  // namespace
}  // namespace ctrun::rdzv
