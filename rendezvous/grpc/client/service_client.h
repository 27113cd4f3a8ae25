// ServiceClient: what each callback-API client of the rendezvous service
// (RendezvousClient, FtClient) holds: its channel (channel.h), the stub, and
// the bookkeeping of its calls (client_calls.h). Destroying it cancels every
// call and waits until gRPC is done with them, before the stub and channel
// go.
//
// Thread model: ClientCalls'.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "base/clock.h"
#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/client/channel.h"
#include "rendezvous/grpc/client/client_calls.h"
#include "rendezvous/grpc/net/credentials.h"

namespace ctrun::rdzv {

class ServiceClient {
 public:
  // A channel to `endpoint` (`tls`, `args`: MakeClientChannel's); the calls'
  // statuses are mapped by `map` and their results posted with `post`.
  ServiceClient(const std::string& endpoint, const TlsConfig& tls, grpc::ChannelArguments args,
                ClientCalls::StatusMap map, ClientCalls::Post post)
      : channel_(MakeClientChannel(endpoint, tls, std::move(args))),
        stub_(v1::Rendezvous::NewStub(channel_)),
        calls_(endpoint, map, std::move(post)) {}
  ~ServiceClient() { calls_.CancelAllAndWait(); }
  ServiceClient(const ServiceClient&) = delete;
  ServiceClient& operator=(const ServiceClient&) = delete;

  auto* async() { return stub_->async(); }
  ClientCalls& calls() { return calls_; }

  // One unary call (ClientCalls::Unary) on this client's stub.
  template <typename Req, typename Rep, typename Method, typename Finish>
  void Unary(Method method, Req req, std::optional<Duration> timeout, Finish finish, bool wait_for_ready = true) {
    calls_.Unary<Req, Rep>(stub_->async(), method, std::move(req), timeout, std::move(finish), wait_for_ready);
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Rendezvous::Stub> stub_;
  ClientCalls calls_;
};

}  // namespace ctrun::rdzv
