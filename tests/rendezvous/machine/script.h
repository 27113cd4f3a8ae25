// Test vocabulary for the rendezvous machine: a fake clock advanced by hand,
// events in, decisions out as one-line strings (events.h Describe).
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "rendezvous/machine/machine.h"

namespace ctrun::rdzv::testing {

using Lines = std::vector<std::string>;
using std::chrono::milliseconds;
using std::chrono::seconds;

// join 600 s, last call 30 s, keep-alive 5 s x 3 (torchrun's defaults).
inline Params Nodes(int min_nodes, int max_nodes) {
  Params p;
  p.min_nodes = min_nodes;
  p.max_nodes = max_nodes;
  return p;
}

inline NodeId N(const std::string& name) { return NodeId{name, 0, 0}; }

class Script {
 public:
  explicit Script(const Params& params) : machine_(RendezvousMachine::Create(params).value()) {}

  Lines Join(const std::string& name, std::optional<int> hint = std::nullopt, int lws = 1,
             uint64_t incarnation = 0, int master_port = 0) {
    alive_.insert(name);
    return Send(rdzv::Join{N(name), incarnation, hint, lws, name + ".ip", master_port});
  }
  Lines KeepAlive(const std::string& name, uint64_t incarnation = 0) {
    return Send(rdzv::KeepAlive{N(name), incarnation});
  }
  Lines Leave(const std::string& name, LeaveReason reason) {
    alive_.erase(name);
    return Send(rdzv::Leave{N(name), 0, reason});
  }
  // The node's health check failed: it leaves as unhealthy with `report`.
  Lines LeaveUnhealthy(const std::string& name, const std::string& report = "check failed") {
    alive_.erase(name);
    return Send(rdzv::Leave{N(name), 0, LeaveReason::kUnhealthy, report});
  }
  Lines Close() { return Send(rdzv::Close{}); }
  // The node's agent got a preemption notice with `remaining_s` left.
  Lines Preempt(const std::string& name, double remaining_s = 20, const std::string& source = "SIGTERM") {
    return Send(rdzv::Preempt{N(name), 0, remaining_s, source});
  }
  Lines Tick() { return Send(rdzv::Tick{}); }

  // The node's agent dies: it sends nothing more.
  void Kill(const std::string& name) { alive_.erase(name); }
  // The node's agent sends keep-alives from now on (e.g. after a Leave).
  void Revive(const std::string& name) { alive_.insert(name); }

  // Moves the clock forward by `d`. Live nodes send KeepAlive at every
  // multiple of keep_alive_interval since time zero; a Tick goes at each
  // NextDeadline() on the way. Checks the NextDeadline contract: a Tick just
  // before it changes nothing, a Tick at it yields a decision.
  Lines Run(Duration d) {
    const Duration interval = machine_.params().keep_alive_interval;
    const TimePoint end = now_ + d;
    Lines out;
    if (!next_keep_alive_) next_keep_alive_ = TimePoint{} + interval;
    for (;;) {
      TimePoint t = std::min(end, *next_keep_alive_);
      std::optional<TimePoint> deadline = machine_.NextDeadline();
      if (deadline && *deadline <= t) {
        REQUIRE(*deadline >= now_);
        CheckQuietBefore(*deadline);
        now_ = *deadline;
        Lines fired = Tick();
        REQUIRE(!fired.empty());
        out.insert(out.end(), fired.begin(), fired.end());
        continue;
      }
      now_ = t;
      if (t == *next_keep_alive_) {
        *next_keep_alive_ += interval;
        std::set<std::string> senders = alive_;
        for (const std::string& name : senders) {
          Lines l = KeepAlive(name);
          out.insert(out.end(), l.begin(), l.end());
        }
      }
      if (t == end) return out;
    }
  }

  // Sets the clock without sending anything (for catch-up tests).
  void Jump(Duration d) {
    now_ += d;
    const Duration interval = machine_.params().keep_alive_interval;
    next_keep_alive_ = TimePoint{} + ((now_ - TimePoint{}) / interval + 1) * interval;
  }

  Duration Elapsed() const { return now_ - TimePoint{}; }
  TimePoint At(Duration d) const { return TimePoint{} + d; }
  RendezvousMachine& machine() { return machine_; }
  Snapshot State() const { return machine_.State(); }
  const std::vector<Decision>& last() const { return last_; }

  // The most recent decision of type T so far, or a failed test.
  template <class T>
  T Latest() const {
    for (auto it = all_.rbegin(); it != all_.rend(); ++it) {
      if (const T* d = std::get_if<T>(&*it)) return *d;
    }
    FAIL("no such decision yet");
    return {};
  }
  RoundComplete LastRound() const { return Latest<RoundComplete>(); }

 private:
  Lines Send(const Event& event) {
    last_ = machine_.Step(event, now_);
    all_.insert(all_.end(), last_.begin(), last_.end());
    Lines out;
    for (const Decision& d : last_) {
      out.push_back(Describe(d));
      if (const Evicted* e = std::get_if<Evicted>(&d)) alive_.erase(e->node.addr);
      if (const TimedOut* e = std::get_if<TimedOut>(&d)) alive_.erase(e->node.addr);
      if (std::holds_alternative<Closed>(d)) alive_.clear();
    }
    return out;
  }

  void CheckQuietBefore(TimePoint deadline) {
    if (deadline <= now_) return;
    RendezvousMachine copy = machine_;
    Snapshot before = copy.State();
    CHECK(copy.Step(rdzv::Tick{}, deadline - std::chrono::nanoseconds(1)).empty());
    CHECK(copy.State() == before);
  }

  RendezvousMachine machine_;
  TimePoint now_{};
  std::optional<TimePoint> next_keep_alive_;
  std::set<std::string> alive_;
  std::vector<Decision> last_;
  std::vector<Decision> all_;
};

}  // namespace ctrun::rdzv::testing
