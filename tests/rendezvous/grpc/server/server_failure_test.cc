// Failure reports through the gRPC rendezvous over real gRPC on 127.0.0.1
// (ReportFailure, `ctrun status --why`): what GetState returns of them, a
// closed run still taking them, and the refusals of hostile or broken
// requests, one line each. No sleeps.
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>

#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/client/client.h"
#include "rendezvous/grpc/convert/proto_convert.h"
#include "rendezvous/grpc/server/server.h"
#include "tests/rendezvous/grpc/rdzv_test_client.h"

namespace ctrun::rdzv {
namespace {

using testing::JoinStreamReader;
using testing::MakeJoin;
using testing::MakeLeave;
using testing::MakeState;
using testing::StartAutoServer;
using testing::TestClient;

// A ReportFailure stub of its own (TestClient has none).
class FailureReporter {
 public:
  explicit FailureReporter(int port)
      : stub_(v1::Rendezvous::NewStub(
            grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()))) {}
  grpc::Status Report(const v1::ReportFailureRequest& request) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ReportFailureReply reply;
    return stub_->ReportFailure(&context, request, &reply);
  }

 private:
  std::unique_ptr<v1::Rendezvous::Stub> stub_;
};

v1::ReportFailureRequest MakeFailureReport(const v1::JoinRequest& join, const std::string& host) {
  v1::ReportFailureRequest r;
  r.set_version(kProtocolVersion);
  r.set_run_id(join.run_id());
  *r.mutable_node() = join.node();
  r.set_incarnation(join.incarnation());
  r.set_token(join.token());
  r.set_round(1);
  r.set_host(host);
  return r;
}

v1::WorkerFailureReport* AddWorkerFailure(v1::ReportFailureRequest& r, int rank, double at, const std::string& message) {
  v1::WorkerFailureReport* f = r.add_failures();
  f->set_rank(rank);
  f->set_local_rank(rank % 2);
  f->set_exit_code(1);
  f->set_failed_at_unix_s(at);
  f->set_error_message(message);
  return f;
}

TEST_CASE("report failure: GetState returns the failures earliest first, and how many came") {
  auto server = StartAutoServer();
  TestClient client(server->port());
  FailureReporter reporter(server->port());
  const v1::JoinRequest ja = MakeJoin("job", "a", 1, 2, 2), jb = MakeJoin("job", "b", 2, 2, 2);
  auto a = client.Join(ja);
  auto b = client.Join(jb);
  for (JoinStreamReader* s : {a.get(), b.get()}) REQUIRE(s->NextOf(v1::Update::kRoundComplete));

  v1::ReportFailureRequest ra = MakeFailureReport(ja, "host-a");
  AddWorkerFailure(ra, 0, 100.5, "RuntimeError: Connection reset by peer");
  AddWorkerFailure(ra, 1, 100.6, "")->set_stopped_by_agent(true);
  REQUIRE(reporter.Report(ra).ok());
  v1::ReportFailureRequest rb = MakeFailureReport(jb, "host-b");
  v1::WorkerFailureReport* root = AddWorkerFailure(rb, 2, 100.0, "ValueError: bad batch");
  root->set_last_line("ValueError: bad batch");
  root->set_error_file("/tmp/e.json");
  root->set_pid(77);
  REQUIRE(reporter.Report(rb).ok());

  v1::StateReply state;
  REQUIRE(client.GetState(MakeState("job"), &state).ok());
  REQUIRE(state.failures_size() == 3);
  CHECK(state.failures_seen() == 3);
  CHECK(state.failures(0).host() == "host-b");
  CHECK(state.failures(0).node().addr() == "b");
  CHECK(state.failures(0).round() == 1);
  CHECK(state.failures(0).failure().rank() == 2);
  CHECK(state.failures(0).failure().last_line() == "ValueError: bad batch");
  CHECK(state.failures(0).failure().error_file() == "/tmp/e.json");
  CHECK(state.failures(0).failure().pid() == 77);
  CHECK(state.failures(0).received_age_s() >= 0);
  CHECK(state.failures(1).failure().rank() == 0);
  CHECK(state.failures(2).failure().stopped_by_agent());

  v1::StateRequest counts = MakeState("job");
  counts.set_counts_only(true);
  REQUIRE(client.GetState(counts, &state).ok());
  CHECK(state.failures_size() == 0);
}

TEST_CASE("a query naming no run (only_run) gets the server's only run, or the runs to pick from") {
  auto server = StartAutoServer();
  TestClient client(server->port());
  v1::StateRequest any = MakeState("");
  any.set_only_run(true);
  v1::StateReply state;
  grpc::Status none = client.GetState(any, &state);
  CHECK(none.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(none.error_message() == "this server serves no run yet");

  auto a = client.Join(MakeJoin("job5", "a", 1, 1, 1));
  REQUIRE(a->NextOf(v1::Update::kRoundComplete));
  REQUIRE(client.GetState(any, &state).ok());
  CHECK(state.run_id() == "job5");
  CHECK(state.complete());
  CHECK(state.nodes_size() == 1);

  // A named run that is not served: no launch advice for a query.
  grpc::Status unknown = client.GetState(MakeState("nope"), &state);
  CHECK(unknown.error_message() == "run 'nope' is not served here (serving 'job5')");

  auto b = client.Join(MakeJoin("job2", "b", 2, 1, 1));
  REQUIRE(b->NextOf(v1::Update::kRoundComplete));
  grpc::Status several = client.GetState(any, &state);
  CHECK(several.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(several.error_message() == "this server serves 2 runs ('job2', 'job5'): name one with --rdzv-id");
  // Without only_run an empty id is an unknown run, as before.
  CHECK(client.GetState(MakeState(""), &state).error_code() == grpc::StatusCode::NOT_FOUND);
}

TEST_CASE("report failure: a closed run still takes a late node's report, and `ctrun status` reads it") {
  auto server = StartAutoServer();
  TestClient client(server->port());
  FailureReporter reporter(server->port());
  const v1::JoinRequest ja = MakeJoin("job", "a", 1, 2, 2), jb = MakeJoin("job", "b", 2, 2, 2);
  auto a = client.Join(ja);
  auto b = client.Join(jb);
  for (JoinStreamReader* s : {a.get(), b.get()}) REQUIRE(s->NextOf(v1::Update::kRoundComplete));
  REQUIRE(client.Leave(MakeLeave(ja, v1::LeaveRequest::NORMAL_EXIT)).ok());  // closes the run
  v1::StateReply state;
  REQUIRE(client.GetState(MakeState("job"), &state).ok());
  REQUIRE(state.closed());

  v1::ReportFailureRequest rb = MakeFailureReport(jb, "host-b");
  AddWorkerFailure(rb, 3, 50, "RuntimeError: Broken pipe");
  REQUIRE(reporter.Report(rb).ok());

  // The client's side: RendezvousClient::ReportFailure, then GetStatus's RunView.
  ClientOptions options;
  options.endpoint = "127.0.0.1:" + std::to_string(server->port());
  options.run_id = "job";
  options.node = NodeId{"a", 1, 0};
  RendezvousClient rc(options, [](std::function<void()> f) { f(); });
  WorkerFailureInfo info;
  info.rank = 1;
  info.signal = 15;
  info.failed_at_unix_s = 49.5;
  info.stacks_file = "/tmp/stacks_1.txt";
  info.last_line = "Killed";
  info.from_stderr = true;  // travels with the rest (compared whole below)
  info.oom_kills_before = 2;  // and so does the evidence for its class
  info.oom_kills_after = 3;
  info.runtime_s = 12.5;
  info.max_rss_kib = 1 << 20;
  info.hung = true;
  info.hang_frame = "train.py:42 in step";
  info.bad_launch = true;
  std::promise<Status> sent;
  rc.ReportFailure(1, "host-a", {info}, std::chrono::seconds(10), [&](const Status& s) { sent.set_value(s); });
  REQUIRE(sent.get_future().get().ok());
  std::promise<Result<RunView>> viewed;
  rc.GetStatus(std::chrono::seconds(10), [&](const Result<RunView>& v) { viewed.set_value(v); });
  Result<RunView> view = viewed.get_future().get();
  REQUIRE(view.ok());
  REQUIRE(view->failures.size() == 2);
  CHECK(view->failures_seen == 2);
  CHECK(view->failures[0].failure == info);
  CHECK(view->failures[0].host == "host-a");
  CHECK(view->failures[0].node == options.node);
  CHECK(view->failures[1].failure.error_message == "RuntimeError: Broken pipe");
  CHECK(view->run_id == "job");
}

TEST_CASE("report failure: out-of-bounds fields, an unknown run, a wrong token are refused in one line") {
  auto server = StartAutoServer("s3cret");
  TestClient client(server->port());
  FailureReporter reporter(server->port());
  v1::JoinRequest ja = MakeJoin("job", "a", 1, 1, 1);
  ja.set_token("s3cret");
  auto a = client.Join(ja);
  REQUIRE(a->NextOf(v1::Update::kRoundComplete));

  v1::ReportFailureRequest r = MakeFailureReport(ja, "host-a");
  for (int i = 0; i < 65; ++i) AddWorkerFailure(r, i, 1, "");
  grpc::Status st = reporter.Report(r);
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(st.error_message() == "failure report: failures holds 65 workers, more than 64: send the rest in another report");

  r = MakeFailureReport(ja, std::string(300, 'h'));
  st = reporter.Report(r);
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(st.error_message() == "failure report: host is 300 bytes, more than 256: send the node's host name");

  r = MakeFailureReport(ja, "host-a");
  AddWorkerFailure(r, 0, 1, std::string(2000, 'm'));
  st = reporter.Report(r);
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(st.error_message().rfind("failure report: failures[0].error_message is 2000 bytes, more than 1024", 0) == 0);

  r = MakeFailureReport(ja, "host-a");
  AddWorkerFailure(r, 0, 1, "")->set_stacks_file(std::string(5000, 's'));
  CHECK(reporter.Report(r).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  r = MakeFailureReport(ja, "host-a");
  AddWorkerFailure(r, 0, -5, "");
  CHECK(reporter.Report(r).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  r = MakeFailureReport(ja, "host-a");
  r.mutable_node()->set_addr(std::string(1000, 'n'));
  CHECK(reporter.Report(r).error_code() == grpc::StatusCode::INVALID_ARGUMENT);

  r = MakeFailureReport(ja, "host-a");
  AddWorkerFailure(r, 0, 1, "x");
  r.set_token("wrong");
  CHECK(reporter.Report(r).error_code() == grpc::StatusCode::PERMISSION_DENIED);
  r.set_token("s3cret");
  r.set_run_id("other");
  st = reporter.Report(r);
  CHECK(st.error_code() == grpc::StatusCode::NOT_FOUND);

  // Nothing refused was kept.
  v1::StateRequest q = MakeState("job");
  q.set_token("s3cret");
  v1::StateReply state;
  REQUIRE(client.GetState(q, &state).ok());
  CHECK(state.failures_size() == 0);
  CHECK(state.failures_seen() == 0);
}

TEST_CASE("verdict: a member whose stream drops is recorded as lost; a failed node's verdict closes the run") {
  auto server = StartAutoServer();
  TestClient client(server->port());
  const v1::JoinRequest ja = MakeJoin("job", "a", 1, 3, 3), jb = MakeJoin("job", "b", 2, 3, 3),
                        jc = MakeJoin("job", "c", 3, 3, 3);
  auto a = client.Join(ja);
  auto b = client.Join(jb);
  auto c = client.Join(jc);
  for (JoinStreamReader* s : {a.get(), b.get(), c.get()}) REQUIRE(s->NextOf(v1::Update::kRoundComplete));

  c.reset();  // its agent is gone: the stream is cancelled with no Leave
  REQUIRE(a->NextOf(v1::Update::kRestartRequested));
  v1::StateReply state;
  REQUIRE(client.GetState(MakeState("job"), &state).ok());
  REQUIRE(state.failures_size() == 1);
  CHECK(state.failures(0).failure().node_lost());
  CHECK(state.failures(0).failure().rank() == -1);
  CHECK(state.failures(0).node().addr() == "c");
  CHECK(state.failures(0).failure().error_message() == "its connection to the rendezvous dropped with no exit reported");

  // A verdict with an unknown class is refused, naming the field; a good one
  // closes the run, and the other node gets it with the Closed.
  v1::LeaveRequest leave = MakeLeave(jb, v1::LeaveRequest::FAILED_EXIT);
  leave.mutable_verdict()->set_cause_class("gremlins");
  grpc::Status refused = client.Leave(leave);
  CHECK(refused.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(refused.error_message().find("cause_class 'gremlins' is not a failure class") != std::string::npos);
  leave.mutable_verdict()->set_cause_class("segfault");
  leave.mutable_verdict()->set_cause_rank(3);
  leave.mutable_verdict()->set_line("verdict: rank 3 on b crashed with a segmentation fault (SIGSEGV)");
  REQUIRE(client.Leave(leave).ok());
  const std::optional<v1::Update> closed = a->NextOf(v1::Update::kClosed);
  REQUIRE(closed);
  CHECK(closed->closed().failed_exit());
  CHECK(closed->closed().verdict().cause_class() == "segfault");
  CHECK(closed->closed().verdict().cause_rank() == 3);
  CHECK(closed->closed().verdict().line() == leave.verdict().line());
}

}  // namespace
}  // namespace ctrun::rdzv
