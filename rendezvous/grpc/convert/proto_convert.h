// Conversions between the wire types of proto/rendezvous.proto (package
// ctrun.rdzv.v1) and the rendezvous machine's own vocabulary (events.h,
// machine.h), for the server and the client; no other file knows both.
//
// All functions are pure and thread-safe; outputs are written into
// caller-owned messages.
#pragma once

#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/result.h"
#include "base/status.h"
#include "rendezvous.pb.h"
#include "rendezvous/machine/events.h"
#include "rendezvous/machine/machine.h"
#include "rendezvous/machine/rdzv_params.h"
#include "rendezvous/machine/run_view.h"

namespace ctrun::rdzv {

// Seconds on the wire to a Duration: not a finite positive number becomes
// zero (the caller's validation names it), beyond 1e8 s is clamped to 1e8 s
// ("for ever", with no overflow of now + d). And back.
Duration DurationFromSeconds(double s);
double SecondsOf(Duration d);

NodeId NodeFromProto(const v1::NodeId& node);
void NodeToProto(const NodeId& node, v1::NodeId* out);

// The run settings a Join carries. Seconds that are not a finite positive
// number become zero (ValidateParams then names the bad key); values beyond
// 1e8 s are clamped to 1e8 s. The result is not validated here.
Params ParamsFromProto(const v1::RunParams& params);
void ParamsToProto(const Params& params, v1::RunParams* out);

// The machine's Join for `request`. An empty request.addr is replaced by
// `peer_ip` (the address the request came from, see PeerIp).
Join JoinFromProto(const v1::JoinRequest& request, const std::string& peer_ip);

// kNormalExit/kFailure/kSignal, or InvalidArgument for an unspecified or
// unknown reason.
Result<LeaveReason> LeaveReasonFromProto(v1::LeaveRequest::Reason reason);

// The Join-stream message for a decision (every Decision kind maps to one
// Update kind; the addressees in RestartRequested/Closed are not sent).
void UpdateFromDecision(const Decision& decision, v1::Update* out);

// The protocol version this side speaks (proto/rendezvous.proto's
// ProtocolVersion); requests of any other are refused.
inline constexpr v1::ProtocolVersion kProtocolVersion = v1::PROTOCOL_VERSION_3;

// The most nodes a RoundComplete may describe: a size list of more is
// malformed (the client would allocate a member for each).
inline constexpr int kMaxRoundNodes = 1 << 20;

// The part of a RoundComplete push every member gets: round, world size,
// hint note, every member's local_world_size (run-length coded: a job of
// equal nodes is one pair) and group rank 0 (the master: address and port)
// whole. The server shares it between recipients and adds each recipient
// itself (AddWholeMember, unless it is the master).
void RoundCompleteForPush(const RoundComplete& d, v1::RoundComplete* out);
// Appends d.members[index] whole to out->members.
void AddWholeMember(const RoundComplete& d, size_t index, v1::RoundComplete* out);

// The Rejected code a machine rejection travels as.
v1::Rejected::Code RejectCodeToProto(RejectCode code);

// A Join refused by the run registry before reaching a machine: NotFound
// (unknown run) -> UNKNOWN_RUN; anything else (another --nnodes, invalid
// params, empty run id) -> BAD_PARAMS. The message is the Status's.
void RejectedFromRegistryError(const Status& error, v1::Rejected* out);

// GetState's reply. last_call_in_s = seconds from `now` to the armed last
// call (>= 0), or -1 when none; live_nodes is Snapshot::live_nodes (every
// node the run holds; 0 once closed).
void StateReplyFromSnapshot(const Snapshot& snapshot, TimePoint now, v1::StateReply* out);
// GetState's reply for counts_only: the same numbers, no node lists.
void StateReplyFromCounts(const Counts& counts, TimePoint now, v1::StateReply* out);
// The client's side: the numbers of a StateReply, the last call as a deadline
// on the caller's clock (`now` + last_call_in_s).
Counts CountsFromStateReply(const v1::StateReply& reply, TimePoint now);

// A run's nodes for `ctrun status` (run_view.h) into a full StateReply, and back.
void StateReplyAddView(const RunView& view, v1::StateReply* out);
RunView RunViewFromStateReply(const v1::StateReply& reply, TimePoint now);

// Straggler detection's messages (straggler.h), both ways.
void StepReportToProto(const StepReport& report, v1::StepReport* out);
StepReport StepReportFromProto(const v1::StepReport& report);
void StragglerChangeToProto(const StragglerChange& change, v1::StragglerChange* out);
// `self`: the node the change is about (the keep-alive's sender).
StragglerChange StragglerChangeFromProto(const NodeId& self, const v1::StragglerChange& change);

// The client's side of UpdateFromDecision: the decision an Update carries,
// addressed to `self` (RestartRequested/Closed name only `self`). Rejected
// codes the machine does not have (UNKNOWN_RUN, BAD_PARAMS) become
// kInvalidJoin with the server's message. A RoundComplete whose size list is
// malformed comes back with no members.
Decision DecisionFromUpdate(const NodeId& self, const v1::Update& update);
Rejected RejectedFromProto(const NodeId& self, const v1::Rejected& rejected);

// The IP in a gRPC peer string: "ipv4:1.2.3.4:555" -> "1.2.3.4",
// "ipv6:[::1]:555" (or "ipv6:%5B::1%5D:555") -> "::1". Empty for any other
// form (e.g. "unix:..."). Never resolves names.
std::string PeerIp(std::string_view peer);

}  // namespace ctrun::rdzv
