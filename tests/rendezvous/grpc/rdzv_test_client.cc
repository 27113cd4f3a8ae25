#include "rdzv_test_client.h"

#include <catch2/catch.hpp>

#include <utility>

#include "rendezvous/grpc/convert/proto_convert.h"

namespace ctrun::rdzv::testing {
namespace {

std::unique_ptr<grpc::ClientContext> ContextWithDeadline() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + kCallDeadline);
  return context;
}

}  // namespace

JoinStreamReader::JoinStreamReader(std::unique_ptr<grpc::ClientContext> context,
                                   std::unique_ptr<grpc::ClientReader<v1::Update>> reader)
    : context_(std::move(context)), reader_(std::move(reader)) {}

JoinStreamReader::~JoinStreamReader() {
  if (finished_) return;
  context_->TryCancel();
  v1::Update drop;
  while (reader_->Read(&drop)) {
  }
  reader_->Finish();
}

std::optional<v1::Update> JoinStreamReader::Next() {
  v1::Update update;
  if (!reader_->Read(&update)) return std::nullopt;
  return update;
}

std::optional<v1::Update> JoinStreamReader::NextOf(v1::Update::KindCase kind) {
  for (std::optional<v1::Update> u = Next(); u; u = Next()) {
    if (u->kind_case() == kind) return u;
  }
  return std::nullopt;
}

grpc::Status JoinStreamReader::Finish() {
  finished_ = true;
  return reader_->Finish();
}

TestClient::TestClient(int port)
    : stub_(v1::Rendezvous::NewStub(
          grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()))) {}

std::unique_ptr<JoinStreamReader> TestClient::Join(const v1::JoinRequest& request) {
  std::unique_ptr<grpc::ClientContext> context = ContextWithDeadline();
  std::unique_ptr<grpc::ClientReader<v1::Update>> reader = stub_->Join(context.get(), request);
  return std::make_unique<JoinStreamReader>(std::move(context), std::move(reader));
}

grpc::Status TestClient::KeepAlive(const v1::KeepAliveRequest& request, v1::KeepAliveReply* reply) {
  return stub_->KeepAlive(ContextWithDeadline().get(), request, reply);
}

grpc::Status TestClient::Leave(const v1::LeaveRequest& request) {
  v1::LeaveReply reply;
  return stub_->Leave(ContextWithDeadline().get(), request, &reply);
}

grpc::Status TestClient::GetState(const v1::StateRequest& request, v1::StateReply* reply) {
  return stub_->GetState(ContextWithDeadline().get(), request, reply);
}

grpc::Status TestClient::Preempt(const v1::PreemptRequest& request, v1::PreemptReply* reply) {
  return stub_->Preempt(ContextWithDeadline().get(), request, reply);
}

v1::RunParams TestParams(int min_nodes, int max_nodes) {
  v1::RunParams p;
  p.set_min_nodes(min_nodes);
  p.set_max_nodes(max_nodes);
  p.set_join_timeout_s(10);
  p.set_last_call_timeout_s(0.1);
  p.set_close_timeout_s(5);
  p.set_keep_alive_interval_s(5);
  p.set_keep_alive_max_attempt(3);
  return p;
}

v1::JoinRequest MakeJoin(const std::string& run_id, const std::string& host, int64_t pid, int min_nodes,
                         int max_nodes, const std::string& addr, int master_port) {
  v1::JoinRequest j;
  j.set_version(kProtocolVersion);
  j.set_run_id(run_id);
  j.mutable_node()->set_addr(host);
  j.mutable_node()->set_pid(pid);
  j.set_incarnation(static_cast<uint64_t>(pid) * 10);
  j.set_local_world_size(2);
  j.set_addr(addr);
  j.set_master_port(master_port);
  *j.mutable_params() = TestParams(min_nodes, max_nodes);
  return j;
}

v1::KeepAliveRequest MakeKeepAlive(const v1::JoinRequest& join) {
  v1::KeepAliveRequest k;
  k.set_version(kProtocolVersion);
  k.set_run_id(join.run_id());
  *k.mutable_node() = join.node();
  k.set_incarnation(join.incarnation());
  k.set_token(join.token());
  return k;
}

v1::LeaveRequest MakeLeave(const v1::JoinRequest& join, v1::LeaveRequest::Reason reason) {
  v1::LeaveRequest l;
  l.set_version(kProtocolVersion);
  l.set_run_id(join.run_id());
  *l.mutable_node() = join.node();
  l.set_incarnation(join.incarnation());
  l.set_reason(reason);
  l.set_token(join.token());
  return l;
}

v1::StateRequest MakeState(const std::string& run_id) {
  v1::StateRequest s;
  s.set_version(kProtocolVersion);
  s.set_run_id(run_id);
  return s;
}

v1::PreemptRequest MakePreempt(const v1::JoinRequest& join, double remaining_s, const std::string& source) {
  v1::PreemptRequest p;
  p.set_version(kProtocolVersion);
  p.set_run_id(join.run_id());
  *p.mutable_node() = join.node();
  p.set_incarnation(join.incarnation());
  p.set_token(join.token());
  p.set_remaining_s(remaining_s);
  p.set_source(source);
  return p;
}

v1::Update Expect(JoinStreamReader& stream, v1::Update::KindCase kind) {
  std::optional<v1::Update> u = stream.Next();
  REQUIRE(u.has_value());
  INFO("got update kind " << static_cast<int>(u->kind_case()) << ", " << u->ByteSizeLong() << " bytes");
  REQUIRE(u->kind_case() == kind);
  return *u;
}

std::unique_ptr<RendezvousServer> StartAutoServer(const std::string& token) {
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.mode = RunRegistry::Mode::kAutoCreate;
  options.token = token;
  Result<std::unique_ptr<RendezvousServer>> server = RendezvousServer::Start(options);
  REQUIRE(server.ok());
  return std::move(server).value();
}

}  // namespace ctrun::rdzv::testing
