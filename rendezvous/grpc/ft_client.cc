#include "rendezvous/grpc/ft_client.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>

#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/ft_convert.h"
#include "rendezvous/grpc/grpc_process.h"
#include "rendezvous/grpc/proto_convert.h"
#include "rendezvous/grpc/channel_backoff.h"

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
  Impl(const FtClientOptions& options, Post post) : options_(options), post_(std::move(post)) {
    grpc::ChannelArguments args;
    SetQuickReconnect(args);
    // Pings the server while a call is open (the watch always is), so a
    // connection the server dropped during a partition, or a server host
    // gone silent, is noticed within ~10 s: the watch ends and is opened
    // again, and the group's next call goes out on a new connection instead
    // of failing on the dead one (which would restart the group's workers).
    // The server accepts pings this often (server.cc).
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    channel_ = grpc::CreateCustomChannel(options_.endpoint, ChannelCredentialsFor(options_.tls, args), args);
    stub_ = v1::Rendezvous::NewStub(channel_);
  }

  ~Impl() {
    CancelWatch();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (grpc::ClientContext* ctx : unary_) ctx->TryCancel();
    }
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [this] { return in_flight_ == 0; });
  }

  // One watch stream. Deletes itself in OnDone.
  class WatchCall : public grpc::ClientReadReactor<v1::FtEvent> {
   public:
    using OnLost = std::function<void(const std::string&, int64_t, const std::string&)>;
    WatchCall(Impl* impl, std::shared_ptr<std::atomic<bool>> stale, OnLost on_lost,
              std::function<void(const Status&)> on_end, std::function<void()> on_open)
        : impl_(impl),
          stale_(std::move(stale)),
          on_lost_(std::move(on_lost)),
          on_end_(std::move(on_end)),
          on_open_(std::move(on_open)) {}

    void Start(const v1::FtWatchRequest& request) {
      request_ = request;
      ctx_.set_wait_for_ready(true);
      impl_->stub_->async()->FtWatch(&ctx_, &request_, this);
      StartRead(&event_);
      StartCall();
    }
    void Cancel() { ctx_.TryCancel(); }

    // The server sends its initial metadata, marked, once it holds the
    // watch (ft_streams.h); a refusal carries no mark.
    void OnReadInitialMetadataDone(bool ok) override {
      if (!ok || !on_open_) return;
      const auto& md = ctx_.GetServerInitialMetadata();
      if (md.find(kFtWatchOpenKey) == md.end()) return;
      impl_->post_([stale = stale_, cb = on_open_] {
        if (!*stale) cb();
      });
    }

    void OnReadDone(bool ok) override {
      if (!ok) return;  // OnDone follows
      if (event_.has_lost()) {
        impl_->post_([stale = stale_, cb = on_lost_, lost = event_.lost()] {
          if (!*stale) cb(lost.group(), lost.quorum_id(), lost.reason());
        });
      }
      StartRead(&event_);
    }

    void OnDone(const grpc::Status& s) override {
      Status status = FtStatusFromGrpc(s, impl_->options_.endpoint);
      impl_->post_([stale = stale_, cb = on_end_, status] {
        if (!*stale) cb(status);
      });
      Impl* impl = impl_;
      {
        std::lock_guard<std::mutex> lock(impl->mu_);
        impl->watches_.erase(this);
      }
      delete this;
      impl->End();
    }

   private:
    Impl* impl_;
    std::shared_ptr<std::atomic<bool>> stale_;
    OnLost on_lost_;
    std::function<void(const Status&)> on_end_;
    std::function<void()> on_open_;
    grpc::ClientContext ctx_;
    v1::FtWatchRequest request_;
    v1::FtEvent event_;
  };

  void Watch(WatchCall::OnLost on_lost, std::function<void(const Status&)> on_end, std::function<void()> on_open) {
    if (watch_stale_) *watch_stale_ = true;
    v1::FtWatchRequest req;
    req.set_version(kProtocolVersion);
    req.set_run_id(options_.run_id);
    req.set_token(options_.token);
    FtParamsToProto(options_.params, req.mutable_params());
    req.set_group(options_.group);
    req.set_node(options_.node);
    watch_stale_ = std::make_shared<std::atomic<bool>>(false);
    auto* call = new WatchCall(this, watch_stale_, std::move(on_lost), std::move(on_end), std::move(on_open));
    Begin();
    {
      std::lock_guard<std::mutex> lock(mu_);
      watches_.insert(call);
    }
    call->Start(req);
  }

  void CancelWatch() {
    if (watch_stale_) *watch_stale_ = true;
    std::lock_guard<std::mutex> lock(mu_);
    for (WatchCall* call : watches_) call->Cancel();
  }

  // One unary call with the callback API; `finish` maps the reply (run
  // through post_).
  template <typename Req, typename Rep, typename Method, typename Finish>
  void Unary(Method method, Req req, std::optional<Duration> timeout, Finish finish) {
    struct Call {
      grpc::ClientContext ctx;
      Req req;
      Rep rep;
    };
    auto call = std::make_shared<Call>();
    call->req = std::move(req);
    if (timeout) call->ctx.set_deadline(std::chrono::system_clock::now() + *timeout);
    call->ctx.set_wait_for_ready(true);
    Begin();
    {
      std::lock_guard<std::mutex> lock(mu_);
      unary_.insert(&call->ctx);
    }
    method(stub_->async(), &call->ctx, &call->req, &call->rep, [this, call, finish](grpc::Status s) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        unary_.erase(&call->ctx);
      }
      Status status = FtStatusFromGrpc(s, options_.endpoint);
      post_([call, finish, status] { finish(status, call->rep); });
      End();
    });
  }

  void Begin() {
    std::lock_guard<std::mutex> lock(mu_);
    ++in_flight_;
  }
  void End() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--in_flight_ == 0) idle_.notify_all();
  }

  FtClientOptions options_;
  Post post_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Rendezvous::Stub> stub_;
  std::mutex mu_;                  // guards the three below
  std::set<WatchCall*> watches_;   // streams not yet done
  std::set<grpc::ClientContext*> unary_;
  int in_flight_ = 0;
  std::condition_variable idle_;
  std::shared_ptr<std::atomic<bool>> watch_stale_;  // caller's thread only
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
  impl_->Unary<v1::FtSyncRequest, v1::FtSyncReply>(
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
  impl_->Unary<v1::FtLeaveRequest, v1::FtLeaveReply>(
      [](auto* a, grpc::ClientContext* c, const v1::FtLeaveRequest* q, v1::FtLeaveReply* r, auto cb) {
        a->FtLeave(c, q, r, std::move(cb));
      },
      std::move(req), timeout, [done](const Status& s, const v1::FtLeaveReply&) { done(s); });
}

}  // namespace ctrun::rdzv
