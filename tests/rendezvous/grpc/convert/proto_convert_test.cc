#include "rendezvous/grpc/convert/proto_convert.h"

#include "rendezvous/grpc/convert/failure_convert.h"

#include <catch2/catch.hpp>
#include <limits>
#include <string>
#include <vector>

namespace ctrun::rdzv {
namespace {

TEST_CASE("PeerIp strips the scheme and port from gRPC peer strings") {
  CHECK(PeerIp("ipv4:127.0.0.1:45678") == "127.0.0.1");
  CHECK(PeerIp("ipv4:10.1.2.3:1") == "10.1.2.3");
  CHECK(PeerIp("ipv6:[::1]:45678") == "::1");
  CHECK(PeerIp("ipv6:%5B::1%5D:45678") == "::1");
  CHECK(PeerIp("ipv6:[fe80::1%25eth0]:45678") == "fe80::1%eth0");
  CHECK(PeerIp("unix:/tmp/sock").empty());
  CHECK(PeerIp("ipv6:[::1").empty());
  CHECK(PeerIp("").empty());
}

TEST_CASE("JoinFromProto fills an empty addr from the peer and keeps a given one") {
  v1::JoinRequest request;
  request.mutable_node()->set_addr("host-a");
  request.mutable_node()->set_pid(42);
  request.set_incarnation(7);
  request.set_local_world_size(4);
  request.set_master_port(29555);
  Join join = JoinFromProto(request, "10.0.0.5");
  CHECK(join.node == NodeId{"host-a", 42, 0});
  CHECK(join.incarnation == 7);
  CHECK(join.addr == "10.0.0.5");
  CHECK(join.master_port == 29555);
  CHECK(join.local_world_size == 4);
  CHECK_FALSE(join.hint_rank.has_value());

  request.set_addr("192.168.1.9");
  request.set_has_hint_rank(true);
  request.set_hint_rank(0);
  join = JoinFromProto(request, "10.0.0.5");
  CHECK(join.addr == "192.168.1.9");
  CHECK(join.hint_rank == 0);
}

TEST_CASE("ParamsFromProto round-trips and turns bad seconds into invalid params") {
  Params p;
  p.min_nodes = 2;
  p.max_nodes = 4;
  p.keep_alive_interval = std::chrono::milliseconds(200);
  v1::RunParams wire;
  ParamsToProto(p, &wire);
  CHECK(ParamsFromProto(wire) == p);

  wire.set_join_timeout_s(std::numeric_limits<double>::quiet_NaN());
  Status status = ValidateParams(ParamsFromProto(wire));
  CHECK(status.IsInvalidArgument());
  CHECK(status.message().find("join_timeout") != std::string::npos);

  wire.set_join_timeout_s(1e300);
  CHECK(ValidateParams(ParamsFromProto(wire)).ok());
}

TEST_CASE("step reports and straggler changes round-trip, bad params are clamped") {
  using std::chrono::milliseconds;
  StepReport report{3, {2.0, 4}, {RankStep{5, 1, milliseconds(250), 7}}};
  v1::StepReport p;
  StepReportToProto(report, &p);
  CHECK(StepReportFromProto(p) == report);
  p.set_straggler_factor(-1);
  p.set_straggler_intervals(0);
  StepReport clamped = StepReportFromProto(p);
  CHECK(clamped.params == StragglerParams{0, 1});

  const NodeId self{"host-b", 9, 0};
  StragglerChange change{self, 5, 1, true, milliseconds(250), milliseconds(100), {2.0, 4}};
  v1::StragglerChange q;
  StragglerChangeToProto(change, &q);
  CHECK(StragglerChangeFromProto(self, q) == change);
}

TEST_CASE("LeaveReasonFromProto refuses an unspecified reason") {
  CHECK(*LeaveReasonFromProto(v1::LeaveRequest::NORMAL_EXIT) == LeaveReason::kNormalExit);
  CHECK(*LeaveReasonFromProto(v1::LeaveRequest::FAILED_EXIT) == LeaveReason::kFailedExit);
  CHECK(*LeaveReasonFromProto(v1::LeaveRequest::SIGNAL) == LeaveReason::kSignal);
  CHECK(LeaveReasonFromProto(v1::LeaveRequest::REASON_UNSPECIFIED).status().IsInvalidArgument());
}

TEST_CASE("a pushed RoundComplete carries every size run-length coded, the master and the recipient whole") {
  const std::vector<Member> members = {Member{{"m0", 1, 0}, 0, 2, "10.0.0.1", 29500},
                                       Member{{"m1", 2, 0}, 1, 4, "10.0.0.2", 29501},
                                       Member{{"m2", 3, 0}, 2, 8, "10.0.0.3", 29502}};
  const RoundComplete round{5, members, 14, false, ""};
  v1::Update full;
  UpdateFromDecision(round, &full);
  v1::Update push;
  RoundCompleteForPush(round, push.mutable_round_complete());
  AddWholeMember(round, 2, push.mutable_round_complete());
  CHECK(push.ByteSizeLong() < full.ByteSizeLong());
  CHECK(std::vector<int>(push.round_complete().local_world_size_values().begin(),
                         push.round_complete().local_world_size_values().end()) == std::vector<int>{2, 4, 8});
  CHECK(std::vector<int>(push.round_complete().local_world_size_counts().begin(),
                         push.round_complete().local_world_size_counts().end()) == std::vector<int>{1, 1, 1});
  REQUIRE(push.round_complete().members_size() == 2);

  const Decision decoded = DecisionFromUpdate(members[2].node, push);
  const auto& got = std::get<RoundComplete>(decoded);
  REQUIRE(got.members.size() == 3);
  CHECK(got.members[0] == members[0]);      // the master: whole
  CHECK(got.members[2] == members[2]);      // the recipient: whole
  CHECK(got.members[1].node == NodeId{});   // anyone else: rank and size only
  CHECK(got.members[1].addr.empty());
  CHECK(got.members[1].group_rank == 1);
  CHECK(got.members[1].local_world_size == 4);
  CHECK(got.world_size == 14);
  CHECK(got.round == 5);

  // The full form (a reconnect into a running round) decodes to the round itself.
  CHECK(std::get<RoundComplete>(DecisionFromUpdate(members[1].node, full)) == round);
}

TEST_CASE("a round of equal nodes is one size pair, whatever its node count") {
  for (int nodes : {1, 10, 10000}) {
    RoundComplete round{3, {}, 8 * nodes, false, ""};
    for (int i = 0; i < nodes; ++i) round.members.push_back(Member{{"n" + std::to_string(i), 1, 0}, i, 8, "", 0});
    v1::Update push;
    RoundCompleteForPush(round, push.mutable_round_complete());
    AddWholeMember(round, static_cast<size_t>(nodes - 1), push.mutable_round_complete());
    INFO(nodes << " nodes");
    CHECK(push.round_complete().local_world_size_values_size() == 1);
    CHECK(push.ByteSizeLong() < 64);
    const auto got = std::get<RoundComplete>(DecisionFromUpdate(round.members.back().node, push));
    REQUIRE(got.members.size() == static_cast<size_t>(nodes));
    CHECK(got.members.back() == round.members.back());
    CHECK(got.members.back().group_rank == nodes - 1);
  }
}

TEST_CASE("a RoundComplete with a malformed size list has no members") {
  struct Case {
    const char* what;
    std::vector<int> values, counts;
    int world_size;
  };
  const Case cases[] = {
      {"unpaired", {2, 2}, {1}, 4},
      {"a zero count", {2, 2}, {1, 0}, 2},
      {"a negative count", {2}, {-1}, 2},
      {"a zero size", {0}, {1}, 0},
      {"a negative size", {-2, 4}, {1, 1}, 2},
      {"sizes that do not sum to world_size", {2}, {3}, 5},
      {"more nodes than kMaxRoundNodes", {1}, {kMaxRoundNodes + 1}, kMaxRoundNodes + 1},
      {"no sizes", {}, {}, 0},
  };
  for (const Case& c : cases) {
    v1::Update u;
    v1::RoundComplete* rc = u.mutable_round_complete();
    rc->set_world_size(c.world_size);
    for (int v : c.values) rc->add_local_world_size_values(v);
    for (int n : c.counts) rc->add_local_world_size_counts(n);
    v1::Member* self = rc->add_members();
    self->set_group_rank(0);
    self->mutable_node()->set_addr("a");
    INFO(c.what);
    CHECK(std::get<RoundComplete>(DecisionFromUpdate(NodeId{"a", 0, 0}, u)).members.empty());
  }
}

TEST_CASE("a RoundComplete says whether its store is on the rendezvous port, unset means not") {
  RoundComplete round{1, {Member{{"m0", 1, 0}, 0, 2, "10.0.0.1", 29500}}, 2, false, ""};
  for (bool on_port : {true, false}) {
    round.store_on_rendezvous_port = on_port;
    v1::Update push;
    RoundCompleteForPush(round, push.mutable_round_complete());
    CHECK(push.round_complete().store_on_rendezvous_port() == on_port);
    CHECK(std::get<RoundComplete>(DecisionFromUpdate(round.members[0].node, push)).store_on_rendezvous_port == on_port);
  }
  v1::Update unset;  // the field left out: false, the agents host the store
  unset.mutable_round_complete()->set_world_size(2);
  unset.mutable_round_complete()->add_local_world_size_values(2);
  unset.mutable_round_complete()->add_local_world_size_counts(1);
  const auto decoded = std::get<RoundComplete>(DecisionFromUpdate(NodeId{"m0", 1, 0}, unset));
  CHECK(decoded.members.size() == 1);
  CHECK_FALSE(decoded.store_on_rendezvous_port);
}

TEST_CASE("a RoundComplete whole member outside its size list is dropped") {
  v1::Update u;
  v1::RoundComplete* rc = u.mutable_round_complete();
  rc->set_world_size(2);
  rc->add_local_world_size_values(2);
  rc->add_local_world_size_counts(1);
  v1::Member* stray = rc->add_members();
  stray->set_group_rank(7);
  stray->set_addr("10.0.0.9");
  const Decision decoded = DecisionFromUpdate(NodeId{"a", 1, 0}, u);
  const auto& got = std::get<RoundComplete>(decoded);
  REQUIRE(got.members.size() == 1);
  CHECK(got.members[0].addr.empty());
  CHECK(got.members[0].local_world_size == 2);
}

TEST_CASE("UpdateFromDecision maps each decision kind") {
  v1::Update u;
  UpdateFromDecision(RoundComplete{3, {Member{{"a", 1, 0}, 0, 2, "10.0.0.1", 29500}}, 2, false, "note"}, &u);
  REQUIRE(u.has_round_complete());
  CHECK(u.round_complete().round() == 3);
  CHECK(u.round_complete().members(0).master_port() == 29500);
  CHECK(u.round_complete().hint_note() == "note");

  u.Clear();
  UpdateFromDecision(RestartRequested{1, RestartReason::kNodeLost, {"c", 3, 0}, {{"a", 1, 0}}}, &u);
  CHECK(u.restart_requested().reason() == v1::RestartRequested::NODE_LOST);
  CHECK(u.restart_requested().cause().addr() == "c");

  u.Clear();
  UpdateFromDecision(Rejected{{"a", 1, 0}, RejectCode::kDuplicateNode, "dup"}, &u);
  CHECK(u.rejected().code() == v1::Rejected::DUPLICATE_NODE);
  CHECK(u.rejected().message() == "dup");

  u.Clear();
  UpdateFromDecision(Admitted{{"a", 1, 0}, AdmitState::kRedundant, 5}, &u);
  CHECK(u.admitted().state() == v1::Admitted::REDUNDANT);
  CHECK(u.admitted().round() == 5);
}

TEST_CASE("StateReplyFromSnapshot counts every node held and the last call") {
  Snapshot s;
  s.round = 2;
  s.participants = {{"a", 1, 0}, {"b", 2, 0}};
  s.rejoining = {{"c", 3, 0}};
  s.redundant = {{"d", 4, 0}};
  s.live_nodes = 4;
  s.live_nodes = 4;
  TimePoint now{};
  s.last_call_deadline = now + std::chrono::milliseconds(1500);
  v1::StateReply reply;
  StateReplyFromSnapshot(s, now, &reply);
  CHECK(reply.live_nodes() == 4);
  CHECK(reply.last_call_in_s() == Approx(1.5));
  CHECK(reply.participants_size() == 2);

  s.last_call_deadline.reset();
  reply.Clear();
  StateReplyFromSnapshot(s, now, &reply);
  CHECK(reply.last_call_in_s() < 0);
}

TEST_CASE("registry errors become UNKNOWN_RUN or BAD_PARAMS") {
  v1::Rejected r;
  RejectedFromRegistryError(Status::NotFound("no such run"), &r);
  CHECK(r.code() == v1::Rejected::UNKNOWN_RUN);
  CHECK(r.message() == "no such run");
  RejectedFromRegistryError(Status::FailedPrecondition("other nnodes"), &r);
  CHECK(r.code() == v1::Rejected::BAD_PARAMS);
}

}  // namespace
}  // namespace ctrun::rdzv

namespace ctrun::rdzv {
namespace {

TEST_CASE("CountsFromStateReply inverts StateReplyFromCounts") {
  Counts c;
  c.round = 3;
  c.complete = false;
  c.min_nodes = 2;
  c.max_nodes = 4;
  c.participants = 3;
  c.rejoining = 1;
  c.redundant = 2;
  c.live_nodes = 6;
  TimePoint now{};
  c.last_call_deadline = now + std::chrono::seconds(12);
  v1::StateReply reply;
  StateReplyFromCounts(c, now, &reply);
  Counts back = CountsFromStateReply(reply, now);
  CHECK(back.round == 3);
  CHECK(back.participants == 3);
  CHECK(back.rejoining == 1);
  CHECK(back.redundant == 2);
  CHECK(back.live_nodes == 6);
  CHECK(back.min_nodes == 2);
  CHECK(back.max_nodes == 4);
  CHECK(back.last_call_deadline == now + std::chrono::seconds(12));
  c.last_call_deadline.reset();
  StateReplyFromCounts(c, now, &reply);
  CHECK_FALSE(CountsFromStateReply(reply, now).last_call_deadline);
}

TEST_CASE("DecisionFromUpdate inverts UpdateFromDecision for the addressee") {
  const NodeId self{"n1", 7, 0};
  const NodeId other{"n2", 8, 0};
  std::vector<Decision> decisions = {
      Admitted{self, AdmitState::kWaiting, 3},
      RoundComplete{2, {Member{other, 0, 2, "10.0.0.2", 4000}, Member{self, 1, 4, "10.0.0.1", 4001}}, 6, false, ""},
      RestartRequested{2, RestartReason::kNodeLost, other, {self}},
      Rejected{self, RejectCode::kDuplicateNode, "held by another incarnation"},
      TimedOut{self, "join_timeout"},
      Evicted{self, "no keep-alive"},
      Closed{4, {self}},
      Closed{4, {self}, false, "", true, VerdictSummary{FailureClass::kOomKilled, 5, "b#9", "b", "was killed", "verdict: x"}},
      Closed{4, {self}, false, "", true, std::nullopt},
  };
  for (const Decision& d : decisions) {
    v1::Update u;
    UpdateFromDecision(d, &u);
    CHECK(Describe(DecisionFromUpdate(self, u)) == Describe(d));
    CHECK(DecisionFromUpdate(self, u) == d);
  }
}

TEST_CASE("proto: a verdict reads back; a bad one is refused naming its field") {
  const VerdictSummary v{FailureClass::kDiskFull, std::nullopt, "n", "h", "ran out of disk space", "verdict: ..."};
  v1::Verdict p;
  VerdictToProto(v, &p);
  CHECK(p.cause_rank() == -1);
  CHECK(p.cause_class() == "disk_full");
  Result<VerdictSummary> back = VerdictFromProto(p);
  REQUIRE(back.ok());
  CHECK(*back == v);
  p.set_cause_class("gremlins");
  CHECK(VerdictFromProto(p).status().message() ==
        "verdict: cause_class 'gremlins' is not a failure class (e.g. segfault, oom_killed, python_exception)");
  p.set_cause_class("segfault");
  p.set_line(std::string(kMaxVerdictLine + 1, 'x'));
  CHECK(VerdictFromProto(p).status().message() == "verdict: line is 2049 bytes, more than 2048: send it cut");
  p.set_line("ok");
  p.set_cause_rank(-2);
  CHECK(VerdictFromProto(p).status().message() == "verdict: cause_rank -2 is negative: send -1 for none");
}

}  // namespace
}  // namespace ctrun::rdzv
