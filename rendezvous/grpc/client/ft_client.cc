#include "rendezvous/grpc/client/ft_client.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>

#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/client/client_calls.h"
#include "rendezvous/grpc/client/service_client.h"
#include "rendezvous/grpc/convert/ft_convert.h"
#include "rendezvous/grpc/convert/proto_convert.h"
#include "rendezvous/grpc/net/grpc_process.h"

namespace ctrun::rdzv {
namespace {

Status FtStatusFromGrpc(const grpc::Status& s, const std::string& endpoint) {
  const std::string& what = s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::OK: return Status::Ok();
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::ABORTED:
      return Status::Aborted(what.empty() ? "fault-tolerance call cancelled" : what);
    case grpc::StatusCode::INVALID_ARGUMENT: return Status::InvalidArgument(what);
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::FAILED_PRECONDITION: return Status::FailedPrecondition(what);
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return Status::ResourceExhausted(what);
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Status::DeadlineExceeded("rendezvous at " + endpoint + " did not answer in time");
    case grpc::StatusCode::UNAVAILABLE: return Status::Unavailable("rendezvous at " + endpoint + ": " + what);
    default: return Status::Unavailable("rendezvous at " + endpoint + ": " + what);
  }
}

}  // namespace

class FtClient::Impl {
 public:
  Impl(const FtClientOptions& options, Post post)
      : options_(options), rpc_(options_.endpoint, options_.tls, KeepAliveArgs(), FtStatusFromGrpc, std::move(post)) {}

  // Pings the server while a call is open (the watch always is), so a
  // connection the server dropped during a partition, or a server host
  // gone silent, is noticed within ~10 s: the watch ends and is opened
  // again, and the group's next call goes out on a new connection instead
  // of failing on the dead one (which would restart the group's workers).
  // The server accepts pings this often (server.cc).
  static grpc::ChannelArguments KeepAliveArgs() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    return args;
  }

  // One watch stream (client_calls.h).
  class WatchCall final : public ReadCall<v1::FtEvent> {
   public:
    using OnLost = std::function<void(const std::string&, int64_t, const std::string&)>;
    WatchCall(Impl* impl, OnLost on_lost, std::function<void(const Status&)> on_end, std::function<void()> on_open)
        : ReadCall(impl->rpc_.calls(), std::move(on_end)),
          impl_(impl),
          on_lost_(std::move(on_lost)),
          on_open_(std::move(on_open)) {}

    void Start(const v1::FtWatchRequest& request) {
      request_ = request;
      context().set_wait_for_ready(true);
      impl_->rpc_.async()->FtWatch(&context(), &request_, this);
      StartReading();
    }

   private:
    // The server sends its initial metadata, marked, once it holds the
    // watch (ft_streams.h); a refusal carries no mark.
    void OnReadInitialMetadataDone(bool ok) override {
      if (!ok || !on_open_) return;
      const auto& md = context().GetServerInitialMetadata();
      if (md.find(kFtWatchOpenKey) == md.end()) return;
      Post([cb = on_open_] { cb(); });
    }

    void OnMessage(const v1::FtEvent& event) override {
      if (!event.has_lost()) return;
      Post([cb = on_lost_, lost = event.lost()] { cb(lost.group(), lost.quorum_id(), lost.reason()); });
    }

    Impl* impl_;
    OnLost on_lost_;
    std::function<void()> on_open_;
    v1::FtWatchRequest request_;
  };

  void Watch(WatchCall::OnLost on_lost, std::function<void(const Status&)> on_end, std::function<void()> on_open) {
    v1::FtWatchRequest req;
    req.set_version(kProtocolVersion);
    req.set_run_id(options_.run_id);
    req.set_token(options_.token);
    FtParamsToProto(options_.params, req.mutable_params());
    req.set_group(options_.group);
    req.set_node(options_.node);
    auto* call = new WatchCall(this, std::move(on_lost), std::move(on_end), std::move(on_open));
    call->Start(req);
  }

  void CancelWatch() { rpc_.calls().CancelStreams(); }

  FtClientOptions options_;
  ServiceClient rpc_;  // last: destroyed first, after every call is done
};

FtClient::FtClient(FtClientOptions options, Post post)
    : options_(std::move(options)), impl_(std::make_unique<Impl>(options_, std::move(post))) {
  KeepCallbackQueueAlive();  // before the first call takes the queue
}

FtClient::~FtClient() = default;

void FtClient::Sync(const SyncCall& call, int part, std::function<void(const Result<SyncAnswer>&)> done) {
  v1::FtSyncRequest req;
  req.set_version(kProtocolVersion);
  req.set_run_id(options_.run_id);
  req.set_token(options_.token);
  FtParamsToProto(options_.params, req.mutable_params());
  SyncCallToProto(call, &req);
  req.set_group(options_.group);
  // Negative values wrap to huge ones, which the server refuses by name.
  req.set_part(static_cast<uint32_t>(part));
  req.set_parts(static_cast<uint32_t>(options_.parts));
  req.set_compact_sources(options_.compact_sources);
  impl_->rpc_.Unary<v1::FtSyncRequest, v1::FtSyncReply>(
      [](auto* a, grpc::ClientContext* c, const v1::FtSyncRequest* q, v1::FtSyncReply* r, auto cb) {
        a->FtSync(c, q, r, std::move(cb));
      },
      std::move(req), options_.sync_timeout,
      [done, group = options_.group](const Status& s, const v1::FtSyncReply& rep) {
        if (!s.ok()) return done(s);
        done(SyncAnswerFromProto(group, rep));
      });
}

void FtClient::Watch(std::function<void(const std::string&, int64_t, const std::string&)> on_lost,
                     std::function<void(const Status&)> on_end, std::function<void()> on_open) {
  impl_->Watch(std::move(on_lost), std::move(on_end), std::move(on_open));
}

void FtClient::CancelWatch() { impl_->CancelWatch(); }

void FtClient::Leave(const std::string& reason, Duration timeout, std::function<void(const Status&)> done,
                     std::optional<int64_t> finished_step) {
  v1::FtLeaveRequest req;
  req.set_version(kProtocolVersion);
  req.set_run_id(options_.run_id);
  req.set_token(options_.token);
  req.set_group(options_.group);
  req.set_reason(reason);
  req.set_finished(finished_step.has_value());
  req.set_finished_step(finished_step.value_or(0));
  impl_->rpc_.Unary<v1::FtLeaveRequest, v1::FtLeaveReply>(
      [](auto* a, grpc::ClientContext* c, const v1::FtLeaveRequest* q, v1::FtLeaveReply* r, auto cb) {
        a->FtLeave(c, q, r, std::move(cb));
      },
      std::move(req), timeout, [done](const Status& s, const v1::FtLeaveReply&) { done(s); });
}

}  // namespace ctrun::rdzv
