// libFuzzer target: the rendezvous server's request handling without gRPC.
// The input is a sequence of records [kind][length: 2 bytes][proto bytes];
// each is parsed as the request message of its kind (JoinRequest,
// KeepAliveRequest, LeaveRequest, StateRequest) or is a clock advance, then
// goes the way server.cc sends it: proto_convert -> RunRegistry -> machine
// Step -> UpdateFromDecision, and back through the client's decoding
// (DecisionFromUpdate, CountsFromStateReply). Checks: no crash, no
// sanitizer report, the invariants of fuzz_checks.h.
#include <cstddef>
#include <cstdint>

#include <google/protobuf/stubs/logging.h>

#include "fuzz_checks.h"
#include "fuzz_input.h"
#include "rendezvous.pb.h"
#include "rendezvous/grpc/convert/proto_convert.h"
#include "rendezvous/machine/run_registry.h"

namespace ctrun::fuzz {
namespace {

namespace v1 = ::ctrun::rdzv::v1;
using rdzv::Decision;

// Sends each decision through the wire and back, as server and client do.
void RoundTrip(const std::vector<Decision>& decisions) {
  for (const Decision& d : decisions) {
    v1::Update update;
    rdzv::UpdateFromDecision(d, &update);
    std::string bytes;
    Require(update.SerializeToString(&bytes));
    v1::Update back;
    Require(back.ParseFromString(bytes));
    rdzv::DecisionFromUpdate(rdzv::NodeId{"self", 1, 0}, back);
    (void)rdzv::Describe(d);
  }
}

void Step(rdzv::RendezvousMachine& machine, const rdzv::Event& event, ctrun::TimePoint now) {
  std::vector<Decision> decisions = machine.Step(event, now);
  CheckStep(machine, decisions, now);
  RoundTrip(decisions);
}

}  // namespace
}  // namespace ctrun::fuzz

// protobuf logs every string field with bad UTF-8 it refuses: noise here.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ctrun;
  using namespace ctrun::fuzz;
  FuzzInput in(data, size);
  // The daemon creates runs on first Join; an agent serves one fixed run.
  const bool auto_create = in.Byte() & 1;
  rdzv::RunRegistry registry(auto_create ? rdzv::RunRegistry::Mode::kAutoCreate : rdzv::RunRegistry::Mode::kFixed);
  if (!auto_create) {
    rdzv::Params p;
    p.min_nodes = 1;
    p.max_nodes = 3;
    p.last_call_timeout = std::chrono::milliseconds(50);
    Require(registry.Add("job", p).ok());
  }
  ctrun::TimePoint now = ctrun::TimePoint{} + std::chrono::hours(1);
  const std::string peer_ip = rdzv::PeerIp("ipv4:10.0.0.7:5555");

  for (int records = 0; !in.done() && records < 256; ++records) {
    const uint8_t kind = in.Byte() % 5;
    const std::string bytes = in.Bytes(in.U16() % 512);
    if (kind == 0) {
      v1::JoinRequest req;
      if (!req.ParseFromString(bytes)) continue;
      rdzv::Join join = rdzv::JoinFromProto(req, peer_ip);
      rdzv::Params params = rdzv::ParamsFromProto(req.params());
      Result<rdzv::RendezvousMachine*> machine = registry.FindForJoin(req.run_id(), params);
      if (!machine.ok()) {
        v1::Rejected rejected;
        rdzv::RejectedFromRegistryError(machine.status(), &rejected);
        continue;
      }
      Step(**machine, join, now);
    } else if (kind == 1) {
      v1::KeepAliveRequest req;
      if (!req.ParseFromString(bytes)) continue;
      Result<rdzv::RendezvousMachine*> machine = registry.Find(req.run_id());
      if (!machine.ok()) continue;
      Step(**machine, rdzv::KeepAlive{rdzv::NodeFromProto(req.node()), req.incarnation()}, now);
    } else if (kind == 2) {
      v1::LeaveRequest req;
      if (!req.ParseFromString(bytes)) continue;
      Result<rdzv::LeaveReason> reason = rdzv::LeaveReasonFromProto(req.reason());
      Result<rdzv::RendezvousMachine*> machine = registry.Find(req.run_id());
      if (!reason.ok() || !machine.ok()) continue;
      Step(**machine, rdzv::Leave{rdzv::NodeFromProto(req.node()), req.incarnation(), *reason}, now);
    } else if (kind == 3) {
      v1::StateRequest req;
      if (!req.ParseFromString(bytes)) continue;
      Result<rdzv::RendezvousMachine*> machine = registry.Find(req.run_id());
      if (!machine.ok()) continue;
      v1::StateReply reply;
      if (req.counts_only()) {
        rdzv::StateReplyFromCounts((*machine)->Tally(), now, &reply);
      } else {
        rdzv::StateReplyFromSnapshot((*machine)->State(), now, &reply);
      }
      rdzv::Counts counts = rdzv::CountsFromStateReply(reply, now);
      Require(counts.live_nodes == (*machine)->Tally().live_nodes);
    } else {
      // The server's timer: advance the clock, Tick every run that is due.
      now += std::chrono::milliseconds(bytes.size() * 20 + 1);
      for (const std::string& run_id : registry.RunIds()) {
        rdzv::RendezvousMachine& machine = **registry.Find(run_id);
        std::optional<ctrun::TimePoint> next = machine.NextDeadline();
        if (next && *next <= now) Step(machine, rdzv::Tick{}, now);
      }
    }
  }
  return 0;
}
