// A small synchronous client of proto/rendezvous.proto for server tests.
//
// Every call carries a deadline, so a test that waits for a push that never
// comes fails after a few seconds instead of hanging. No sleeps anywhere.
// Not thread-safe; one TestClient per test is enough (streams are
// independent).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/server/server.h"

namespace ctrun::rdzv::testing {

namespace v1 = ::ctrun::rdzv::v1;

// A server on 127.0.0.1, port 0, that creates a run at its first Join
// (RunRegistry::Mode::kAutoCreate), with `token` ("" none); REQUIREs it started.
std::unique_ptr<RendezvousServer> StartAutoServer(const std::string& token = "");

// How long any single call or stream may take before the test fails.
inline constexpr std::chrono::seconds kCallDeadline{10};

// An open Join stream. The destructor cancels it if still open.
class JoinStreamReader {
 public:
  JoinStreamReader(std::unique_ptr<grpc::ClientContext> context,
                   std::unique_ptr<grpc::ClientReader<v1::Update>> reader);
  ~JoinStreamReader();

  // The next update; nullopt when the stream ended (then call Finish) or the
  // stream's deadline passed.
  std::optional<v1::Update> Next();

  // Reads updates until one with `kind` arrives and returns it; nullopt if
  // the stream ends first. Skipped updates are lost.
  std::optional<v1::Update> NextOf(v1::Update::KindCase kind);

  // The stream's final status; call after Next() returned nullopt.
  grpc::Status Finish();

 private:
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReader<v1::Update>> reader_;
  bool finished_ = false;
};

class TestClient {
 public:
  explicit TestClient(int port);

  std::unique_ptr<JoinStreamReader> Join(const v1::JoinRequest& request);
  grpc::Status KeepAlive(const v1::KeepAliveRequest& request, v1::KeepAliveReply* reply);
  grpc::Status Leave(const v1::LeaveRequest& request);
  grpc::Status GetState(const v1::StateRequest& request, v1::StateReply* reply);
  grpc::Status Preempt(const v1::PreemptRequest& request, v1::PreemptReply* reply);

 private:
  std::unique_ptr<v1::Rendezvous::Stub> stub_;
};

// Short settings for tests: join 10 s, last call 0.1 s, keep-alive 5 s x 3.
v1::RunParams TestParams(int min_nodes, int max_nodes);

// A version-1 Join of node {host, pid} to `run_id` with TestParams(min, max),
// local_world_size 2, addr = `addr` (empty: the server fills the peer's),
// master_port = `master_port`.
v1::JoinRequest MakeJoin(const std::string& run_id, const std::string& host, int64_t pid, int min_nodes,
                         int max_nodes, const std::string& addr = "", int master_port = 29500);

v1::KeepAliveRequest MakeKeepAlive(const v1::JoinRequest& join);
v1::LeaveRequest MakeLeave(const v1::JoinRequest& join, v1::LeaveRequest::Reason reason);
v1::StateRequest MakeState(const std::string& run_id);
// The next update of `stream`, which must be of `kind` (REQUIREd: a test
// case fails naming the kind it got).
v1::Update Expect(JoinStreamReader& stream, v1::Update::KindCase kind);

// The preemption notice of `join`'s node: `remaining_s` left, `source`.
v1::PreemptRequest MakePreempt(const v1::JoinRequest& join, double remaining_s, const std::string& source);

}  // namespace ctrun::rdzv::testing
