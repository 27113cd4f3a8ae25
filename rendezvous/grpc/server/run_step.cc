// RendezvousServer::Impl's path from one event to the wire (server_impl.h):
// step the run's machine, write its state, route the decisions onto the
// addressees' Join streams, re-arm the timer.
#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>
#include <variant>

#include "rendezvous/grpc/convert/proto_convert.h"
#include "rendezvous/grpc/server/round_push.h"
#include "rendezvous/grpc/server/server_impl.h"

namespace ctrun::rdzv {
namespace {

// Node ids a logged decision names at most (a round of 10,000 is one line).
constexpr size_t kLoggedNodes = 8;

bool AnswersJoin(const Decision& d, const NodeId& joiner) {
  if (const auto* a = std::get_if<Admitted>(&d)) return a->node == joiner;
  if (const auto* r = std::get_if<Rejected>(&d)) return r->node == joiner;
  return false;
}

const Rejected* RejectionOf(const Decision& d, const NodeId& node) {
  const auto* r = std::get_if<Rejected>(&d);
  return r && r->node == node ? r : nullptr;
}

}  // namespace

RendezvousServer::Impl::StepOutcome RendezvousServer::Impl::StepRun(const std::string& run_id,
                                                                    RendezvousMachine& machine, const RunEvent& ev,
                                                                    Outbox& out) {
  mu_.AssertHeld("StepRun");
  std::vector<Decision> decisions = machine.Step(ev.event, ev.now);
  states_.Save(run_id, machine, ev.save == Save::kAlways || !decisions.empty());
  StepOutcome outcome;
  if (ev.own_rejection == OwnRejection::kReturnAlone) {
    for (const Decision& d : decisions) {
      if (const Rejected* r = RejectionOf(d, *ev.caller)) {
        outcome.own_rejection = *r;
        return outcome;
      }
    }
  } else if (ev.own_rejection == OwnRejection::kReturn) {
    std::vector<Decision> others;
    for (Decision& d : decisions) {
      if (const Rejected* r = RejectionOf(d, *ev.caller)) {
        outcome.own_rejection = *r;
      } else {
        others.push_back(std::move(d));
      }
    }
    decisions = std::move(others);
  }
  const NodeId* joiner = ev.own_rejection == OwnRejection::kRoute ? ev.caller : nullptr;
  outcome.caller_rejected = Route(run_id, decisions, joiner, joiner ? ev.caller_stream : nullptr, out);
  registry_.NoteStepped(run_id, ev.now);  // closed and drained: its forget time starts
  Rearm(machine);
  return outcome;
}

bool RendezvousServer::Impl::Route(const std::string& run_id, const std::vector<Decision>& decisions,
                                   const NodeId* joiner, JoinStream* joiner_stream, Outbox& out) {
  mu_.AssertHeld("Route");
  bool answered = false, rejected = false;
  metrics_.OnDecisions(run_id, decisions, Clock::now());
  for (const Decision& d : decisions) {
    if (joiner && !answered && AnswersJoin(d, *joiner)) {
      answered = true;
      rejected = std::holds_alternative<Rejected>(d);
    }
    // Serialized once per decision; every addressee's stream shares the bytes.
    grpc::ByteBuffer update;
    if (!std::holds_alternative<RoundComplete>(d)) {
      v1::Update message;
      UpdateFromDecision(d, &message);
      const grpc::Slice bytes(message.SerializeAsString());
      update = grpc::ByteBuffer(&bytes, 1);
    }
    auto send = [&](const NodeId& node, bool finish_after, grpc::ByteBuffer message,
                    std::optional<uint64_t> round = std::nullopt) {
      JoinStream* stream = (joiner && answered && node == *joiner) ? joiner_stream : streams_.Find(run_id, node);
      if (stream && stream->EnqueueBytes(std::move(message), round, finish_after)) out.kicks.push_back(stream);
    };
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, RoundComplete>) {
            const bool store_here = stores_.Grant(
                run_id, x.members,
                [&](const NodeId& node) {
                  return (joiner && answered && node == *joiner) ? joiner_stream : streams_.Find(run_id, node);
                },
                out);
            const RoundPush push(x, store_here);
            for (size_t i = 0; i < x.members.size(); ++i) send(x.members[i].node, false, push.For(i), x.round);
          } else if constexpr (std::is_same_v<T, RestartRequested> || std::is_same_v<T, Closed>) {
            if constexpr (std::is_same_v<T, RestartRequested>) {
              // A member evicted for its keep-alives: `ctrun status --why`'s node_lost.
              if (x.reason == RestartReason::kNodeLost) {
                failures_.AddLost(run_id, x.cause, x.round, "it sent no keep-alive in time and was evicted");
              }
            }
            stores_.Release(run_id, false);
            for (const NodeId& n : x.nodes) send(n, std::is_same_v<T, Closed>, update);
          } else if constexpr (std::is_same_v<T, PreemptNotice>) {
            for (const NodeId& n : x.nodes) send(n, false, update);
          } else if constexpr (std::is_same_v<T, Admitted>) {
            send(x.node, false, update);
          } else {
            send(x.node, true, update);  // Rejected, TimedOut, Evicted end the stream
          }
        },
        d);
    if (!std::holds_alternative<Admitted>(d) && !std::holds_alternative<Rejected>(d)) {
      out.logs.push_back("rendezvous run '" + run_id + "': " + Narrate(d, kLoggedNodes));
      if (spdlog::should_log(spdlog::level::debug)) {
        out.debug_logs.push_back("rendezvous run '" + run_id + "': " + Describe(d, kLoggedNodes));
      }
    }
  }
  CollectDrained(run_id, out);
  return rejected;
}

void RendezvousServer::Impl::CollectDrained(const std::string& run_id, Outbox& out) {
  mu_.AssertHeld("CollectDrained");
  Result<RendezvousMachine*> machine = registry_.Find(run_id);
  if (machine.ok() && (*machine)->Tally().live_nodes > 0) return;
  stores_.Release(run_id, true);
  streams_.TakeDrainedWaiters(run_id, out);
}

void RendezvousServer::Impl::ForgetDue(TimePoint now, Outbox& out) {
  mu_.AssertHeld("ForgetDue");
  if (!registry_.NextForget() || *registry_.NextForget() > now) return;
  for (const std::string& run_id : registry_.ForgetDue(now)) {
    streams_.ForgetRun(run_id, out);  // its streams ended, its drained waiters called
    steps_.Forget(run_id);
    failures_.Forget(run_id);
    metrics_.Forget(run_id);
    stores_.Release(run_id, true);
    states_.Remove(run_id);
    spdlog::debug("rendezvous run '{}': closed and drained for --closed-run-ttl: forgotten", run_id);
  }
}

void RendezvousServer::Impl::Rearm(const RendezvousMachine& machine) {
  mu_.AssertHeld("Rearm");
  std::optional<TimePoint> next = machine.NextDeadline();
  if (std::optional<TimePoint> forget = registry_.NextForget(); forget && (!next || *forget < *next)) next = forget;
  timer_.WakeBy(next);
}

}  // namespace ctrun::rdzv
