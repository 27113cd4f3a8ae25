// logs_load's run holder: what the server requires before it takes a
// ShipLogs stream is a run it holds (rendezvous/grpc/server/logs_calls.cc:
// token, version, a known run; it does not ask whether the shipping node
// is a member). The holder makes and keeps that run as one real agent
// would (launcher/rdzv/grpc_rendezvous.cc): a Join stream for a run of one
// node (the round completes at once), read until the stream ends, and a
// keep-alive every keep-alive interval, so the run is neither evicted nor
// closed while the nodes ship.
//
// Threads: Start on the caller's; then one thread reads the stream and one
// sends the keep-alives, until Stop (cancels the stream, joins both).
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "rendezvous.grpc.pb.h"

namespace logs_load {

namespace v1 = ::ctrun::rdzv::v1;

class RunHolder {
 public:
  explicit RunHolder(std::shared_ptr<grpc::Channel> channel) : stub_(v1::Rendezvous::NewStub(std::move(channel))) {}
  ~RunHolder() { Stop(); }

  // Joins `run_id` and waits (at most timeout_s) for its round. "" when the
  // run is held, else why not (the server's refusal).
  std::string Start(const std::string& run_id, double timeout_s);
  // Ends the stream and the keep-alives. Idempotent.
  void Stop();
  // Keep-alives the server refused or that failed (0 expected).
  int keep_alive_errors() const;

 private:
  void KeepAlives();

  std::unique_ptr<v1::Rendezvous::Stub> stub_;
  v1::JoinRequest join_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<v1::Update>> stream_;
  std::thread reader_, keeper_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  int keep_alive_errors_ = 0;  // guarded by mu_
};

}  // namespace logs_load
