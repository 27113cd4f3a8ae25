#include "rendezvous/grpc/net/grpc_process.h"

#include <absl/synchronization/mutex.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>

namespace ctrun::rdzv {
namespace {

// One callback-API call on a channel that is never destroyed: it holds a
// reference to gRPC's shared callback completion queue for the life of the
// process. The call's deadline has passed when it starts, so it fails at
// once; the unix path does not exist, so nothing is ever connected.
struct CallbackQueueKeeper {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> stub;
  grpc::ClientContext context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
};

}  // namespace

void KeepCallbackQueueAlive() {
  // Reachable from this static until exit, so LeakSanitizer does not count it.
  static CallbackQueueKeeper* keeper = [] {
    auto* k = new CallbackQueueKeeper;
    k->channel = grpc::CreateChannel("unix:/nonexistent/ctrun-callback-queue-keeper",
                                     grpc::InsecureChannelCredentials());
    k->stub = std::make_unique<grpc::GenericStub>(k->channel);
    grpc::Slice empty;  // a message of no bytes: an unset ByteBuffer cannot be sent
    k->request = grpc::ByteBuffer(&empty, 1);
    k->context.set_deadline(std::chrono::system_clock::now());
    k->stub->UnaryCall(&k->context, "/ctrun.keeper/Hold", grpc::StubOptions(), &k->request, &k->response,
                       [](const grpc::Status&) {});
    return k;
  }();
  (void)keeper;
}

void ConfigureGrpcProcess() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  KeepCallbackQueueAlive();
}

}  // namespace ctrun::rdzv
