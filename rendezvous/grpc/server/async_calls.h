// The plumbing of the calls the server serves through gRPC's async API on
// completion queues of its own (serve_queues.h), not as callbacks: Join,
// FtSync and FtWatch, the calls a large job holds open by the thousand.
//
// Why: every callback call of a process shares gRPC's one process-wide
// callback queue (Debian's libgrpc polls with epoll1, which cannot run it in
// the background), and that libgrpc, built without NDEBUG, looks each
// completion up in a list of its queue's outstanding operations: with one
// open Join, FtWatch or held FtSync per node or group, O(N) per completion
// and O(N^2) per round or step. Spread over ServeQueues::kQueues queues, a
// completion scans about N/kQueues.
//
//   AsyncService  the service type: those three async, every other method a callback
//   AsyncTag      what a queue's thread is handed with each completion
//   CallTag       an AsyncTag that calls one member function of its call
//   LiveCalls     the async call objects alive, so the queues outlast them
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <mutex>

#include "rendezvous.grpc.pb.h"

namespace ctrun::rdzv {

// The service with Join as a raw async method, FtSync and FtWatch as async
// methods and every other method a callback: CallbackService without those
// three callbacks (gRPC keeps a callback handler that a later mark would
// leave in place). A method added to the proto must be added here too: its
// callback override in the server then compiles.
using AsyncService = v1::Rendezvous::WithRawMethod_Join<v1::Rendezvous::WithCallbackMethod_KeepAlive<
    v1::Rendezvous::WithCallbackMethod_Leave<v1::Rendezvous::WithCallbackMethod_GetState<
        v1::Rendezvous::WithCallbackMethod_Preempt<v1::Rendezvous::WithCallbackMethod_ReportFailure<
            v1::Rendezvous::WithCallbackMethod_ShipLogs<v1::Rendezvous::WithCallbackMethod_ReadLogs<
                v1::Rendezvous::WithAsyncMethod_FtSync<v1::Rendezvous::WithAsyncMethod_FtWatch<
                    v1::Rendezvous::WithCallbackMethod_FtLeave<v1::Rendezvous::Service>>>>>>>>>>>;

// A completion of one operation: the queue's thread calls Proceed with
// gRPC's `ok`. Proceed may delete the object that holds the tag.
class AsyncTag {
 public:
  virtual void Proceed(bool ok) = 0;

 protected:
  ~AsyncTag() = default;
};

template <class Call>
class CallTag final : public AsyncTag {
 public:
  using Step = void (Call::*)(bool ok);
  CallTag(Call* call, Step step) : call_(call), step_(step) {}
  void Proceed(bool ok) override { (call_->*step_)(ok); }

 private:
  Call* const call_;
  const Step step_;
};

// A count of the async call objects alive (requested or in a call): their
// queues are shut down only once none is left, since an operation started
// on a queue after its shutdown is a fatal error in gRPC.
class LiveCalls {
 public:
  void Add();
  void Remove();
  // Blocks until no call object is left.
  void WaitNone();

 private:
  std::mutex mu_;
  std::condition_variable none_;
  int n_ = 0;
};

}  // namespace ctrun::rdzv
