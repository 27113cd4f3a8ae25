#include "rendezvous/grpc/client.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/failure_convert.h"
#include "rendezvous/grpc/grpc_process.h"
#include "rendezvous/grpc/proto_convert.h"
#include "rendezvous/grpc/channel_backoff.h"

namespace ctrun::rdzv {

namespace v1 = ::ctrun::rdzv::v1;

namespace {

Status FromGrpc(const grpc::Status& s, const std::string& endpoint) {
  if (s.ok()) return Status::Ok();
  const std::string what = s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      if (what.find("andshake") != std::string::npos) {
        return Status::FailedPrecondition(
            "TLS handshake with the rendezvous at " + endpoint + " failed (" + what +
            "): give every node the CA that signed the server's certificate (tls_ca), a certificate that names "
            "the endpoint's host (or set tls_server_name), and use TLS on both sides or on neither");
      }
      return Status::Unavailable("rendezvous at " + endpoint + " is unreachable: " + what);
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Status::DeadlineExceeded("rendezvous at " + endpoint + " did not answer in time");
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Status::FailedPrecondition(what);
    case grpc::StatusCode::CANCELLED:
      return Status::Aborted("rendezvous call cancelled");
    default:
      return Status::Unavailable("rendezvous at " + endpoint + ": " + what);
  }
}

// Counts calls in flight so the destructor can wait for the last callback
// from gRPC before the stub and channel go away.
class CallTracker {
 public:
  void Begin() {
    std::lock_guard<std::mutex> lock(mu_);
    ++in_flight_;
  }
  void End() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--in_flight_ == 0) cv_.notify_all();
  }
  void WaitIdle() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return in_flight_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;
};

// The fields that name the caller in every node request: the protocol
// version, the run, the node and its incarnation, the token.
template <class Request>
void SetCaller(const ClientOptions& options, Request& req) {
  req.set_version(kProtocolVersion);
  req.set_run_id(options.run_id);
  NodeToProto(options.node, req.mutable_node());
  req.set_incarnation(options.incarnation);
  req.set_token(options.token);
}

}  // namespace

class RendezvousClient::Impl {
 public:
  Impl(const ClientOptions& options, Post post) : options_(options), post_(std::move(post)) {
    grpc::ChannelArguments args;
    SetQuickReconnect(args);
    std::shared_ptr<grpc::ChannelCredentials> credentials = ChannelCredentialsFor(options_.tls, args);
    channel_ = grpc::CreateCustomChannel(options_.endpoint, credentials, args);
    stub_ = v1::Rendezvous::NewStub(channel_);
  }

  ~Impl() {
    CancelJoin();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (grpc::ClientContext* ctx : unary_) ctx->TryCancel();
    }
    tracker_.WaitIdle();
  }

  // One Join stream. Deletes itself in OnDone.
  class JoinCall : public grpc::ClientReadReactor<v1::Update> {
   public:
    JoinCall(Impl* impl, std::shared_ptr<std::atomic<bool>> stale,
             std::function<void(const Update&)> on_update, std::function<void(const Status&)> on_end)
        : impl_(impl), stale_(std::move(stale)), on_update_(std::move(on_update)), on_end_(std::move(on_end)) {}

    void Start(const v1::JoinRequest& request, Reconnect reconnect) {
      request_ = request;
      ctx_.set_wait_for_ready(true);
      if (reconnect != Reconnect::kNo) ctx_.AddMetadata(kReconnectKey, std::string(ReconnectValue(reconnect)));
      impl_->stub_->async()->Join(&ctx_, &request_, this);
      StartRead(&update_);
      StartCall();
    }
    void Cancel() { ctx_.TryCancel(); }

    void OnReadDone(bool ok) override {
      if (!ok) return;  // OnDone follows
      Update u = DecisionFromUpdate(impl_->options_.node, update_);
      impl_->post_([stale = stale_, cb = on_update_, u] {
        if (!*stale) cb(u);
      });
      StartRead(&update_);
    }

    void OnDone(const grpc::Status& s) override {
      Status status = FromGrpc(s, impl_->options_.endpoint);
      impl_->post_([stale = stale_, cb = on_end_, status] {
        if (!*stale) cb(status);
      });
      Impl* impl = impl_;
      {
        std::lock_guard<std::mutex> lock(impl->mu_);
        impl->joins_.erase(this);
      }
      delete this;
      impl->tracker_.End();
    }

   private:
    Impl* impl_;
    std::shared_ptr<std::atomic<bool>> stale_;
    std::function<void(const Update&)> on_update_;
    std::function<void(const Status&)> on_end_;
    grpc::ClientContext ctx_;
    v1::JoinRequest request_;
    v1::Update update_;
  };

  // The previous stream is not cancelled: a cancelled stream tells the
  // server this node is gone. The server ends it when the new Join arrives;
  // its callbacks are dropped from now on.
  void Join(const JoinArgs& a, std::function<void(const Update&)> on_update,
            std::function<void(const Status&)> on_end) {
    if (join_stale_) *join_stale_ = true;
    v1::JoinRequest req;
    SetCaller(options_, req);
    req.set_has_hint_rank(a.hint_rank.has_value());
    req.set_hint_rank(a.hint_rank.value_or(0));
    req.set_local_world_size(a.local_world_size);
    req.set_addr(a.addr);
    req.set_master_port(a.master_port);
    ParamsToProto(options_.params, req.mutable_params());

    join_stale_ = std::make_shared<std::atomic<bool>>(false);
    auto* call = new JoinCall(this, join_stale_, std::move(on_update), std::move(on_end));
    tracker_.Begin();
    {
      std::lock_guard<std::mutex> lock(mu_);
      joins_.insert(call);
    }
    call->Start(req, a.reconnect);
  }

  void CancelJoin() {
    if (join_stale_) *join_stale_ = true;
    std::lock_guard<std::mutex> lock(mu_);
    for (JoinCall* call : joins_) call->Cancel();
  }

  // Runs one unary call with the callback API; `finish` maps the reply.
  // `method(async_stub, ctx, req, rep, callback)` starts the call.
  template <typename Req, typename Rep, typename Method, typename Finish>
  void Unary(Method method, Req req, std::optional<Duration> timeout, Finish finish, bool wait_for_ready = true) {
    struct Call {
      grpc::ClientContext ctx;
      Req req;
      Rep rep;
    };
    auto call = std::make_shared<Call>();
    call->req = std::move(req);
    if (timeout) call->ctx.set_deadline(std::chrono::system_clock::now() + *timeout);
    call->ctx.set_wait_for_ready(wait_for_ready);
    tracker_.Begin();
    {
      std::lock_guard<std::mutex> lock(mu_);
      unary_.insert(&call->ctx);
    }
    method(stub_->async(), &call->ctx, &call->req, &call->rep,
                              [this, call, finish](grpc::Status s) {
                                {
                                  std::lock_guard<std::mutex> lock(mu_);
                                  unary_.erase(&call->ctx);
                                }
                                Status status = FromGrpc(s, options_.endpoint);
                                post_([call, finish, status] { finish(status, call->rep); });
                                tracker_.End();
                              });
  }

  ClientOptions options_;
  Post post_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Rendezvous::Stub> stub_;
  std::mutex mu_;
  std::set<JoinCall*> joins_;  // streams not yet done
  std::shared_ptr<std::atomic<bool>> join_stale_;
  std::set<grpc::ClientContext*> unary_;
  CallTracker tracker_;
};

RendezvousClient::RendezvousClient(ClientOptions options, Post post)
    : options_(std::move(options)), impl_(std::make_unique<Impl>(options_, std::move(post))) {
  KeepCallbackQueueAlive();  // before the first call takes the queue
}

RendezvousClient::~RendezvousClient() = default;

void RendezvousClient::Join(const JoinArgs& args, std::function<void(const Update&)> on_update,
                            std::function<void(const Status&)> on_end) {
  impl_->Join(args, std::move(on_update), std::move(on_end));
}

void RendezvousClient::CancelJoin() { impl_->CancelJoin(); }

void RendezvousClient::KeepAlive(std::function<void(const Status&)> done) {
  KeepAlive(std::nullopt, [done](const Status& s, const std::vector<StragglerChange>&) { done(s); });
}

void RendezvousClient::KeepAlive(const std::optional<StepReport>& steps, KeepAliveDone done) {
  v1::KeepAliveRequest req;
  SetCaller(options_, req);
  if (steps) StepReportToProto(*steps, req.mutable_steps());
  const NodeId self = options_.node;
  impl_->Unary<v1::KeepAliveRequest, v1::KeepAliveReply>(
      [](auto* a, grpc::ClientContext* c, const v1::KeepAliveRequest* q, v1::KeepAliveReply* r, auto cb) { a->KeepAlive(c, q, r, std::move(cb)); }, std::move(req),
      options_.params.keep_alive_interval,
      [done, self](const Status& s, const v1::KeepAliveReply& rep) {
        if (!s.ok()) return done(s, {});
        if (rep.has_rejected()) return done(ToStatus(RejectedFromProto(self, rep.rejected())), {});
        std::vector<StragglerChange> changes;
        for (const v1::StragglerChange& c : rep.stragglers()) changes.push_back(StragglerChangeFromProto(self, c));
        done(Status::Ok(), changes);
      });
}

void RendezvousClient::Leave(LeaveReason reason, Duration timeout,
                             std::function<void(const Status&)> done, const std::string& report,
                             const std::optional<VerdictSummary>& verdict) {
  v1::LeaveRequest req;
  SetCaller(options_, req);
  req.set_reason(reason == LeaveReason::kNormalExit   ? v1::LeaveRequest::NORMAL_EXIT
                 : reason == LeaveReason::kFailedExit ? v1::LeaveRequest::FAILED_EXIT
                 : reason == LeaveReason::kSignal   ? v1::LeaveRequest::SIGNAL
                 : reason == LeaveReason::kUnhealthy ? v1::LeaveRequest::UNHEALTHY
                                                    : v1::LeaveRequest::FAILURE);
  req.set_report(report);
  if (verdict) VerdictToProto(*verdict, req.mutable_verdict());
  impl_->Unary<v1::LeaveRequest, v1::LeaveReply>(
      [](auto* a, grpc::ClientContext* c, const v1::LeaveRequest* q, v1::LeaveReply* r, auto cb) { a->Leave(c, q, r, std::move(cb)); }, std::move(req), timeout,
      [done](const Status& s, const v1::LeaveReply&) { done(s); });
}

void RendezvousClient::GetState(Duration timeout,
                                std::function<void(const Result<Counts>&)> done) {
  v1::StateRequest req;
  req.set_version(kProtocolVersion);
  req.set_run_id(options_.run_id);
  req.set_token(options_.token);
  req.set_counts_only(true);
  impl_->Unary<v1::StateRequest, v1::StateReply>(
      [](auto* a, grpc::ClientContext* c, const v1::StateRequest* q, v1::StateReply* r, auto cb) { a->GetState(c, q, r, std::move(cb)); }, std::move(req), timeout,
      [done](const Status& s, const v1::StateReply& rep) {
        if (!s.ok()) return done(s);
        done(CountsFromStateReply(rep, Clock::now()));
      },
      /*wait_for_ready=*/false);
}

void RendezvousClient::GetStatus(Duration timeout, std::function<void(const Result<RunView>&)> done) {
  v1::StateRequest req;
  req.set_version(kProtocolVersion);
  req.set_run_id(options_.run_id);
  req.set_only_run(options_.run_id.empty());
  req.set_token(options_.token);
  impl_->Unary<v1::StateRequest, v1::StateReply>(
      [](auto* a, grpc::ClientContext* c, const v1::StateRequest* q, v1::StateReply* r, auto cb) { a->GetState(c, q, r, std::move(cb)); }, std::move(req), timeout,
      [done](const Status& s, const v1::StateReply& rep) {
        if (!s.ok()) return done(s);
        done(RunViewFromStateReply(rep, Clock::now()));
      },
      /*wait_for_ready=*/false);
}

void RendezvousClient::Preempt(double remaining_s, const std::string& source, Duration timeout,
                               std::function<void(const Result<PreemptSent>&)> done) {
  v1::PreemptRequest req;
  SetCaller(options_, req);
  req.set_remaining_s(remaining_s);
  req.set_source(source);
  impl_->Unary<v1::PreemptRequest, v1::PreemptReply>(
      [](auto* a, grpc::ClientContext* c, const v1::PreemptRequest* q, v1::PreemptReply* r, auto cb) {
        a->Preempt(c, q, r, std::move(cb));
      },
      std::move(req), timeout,
      [done](const Status& s, const v1::PreemptReply& rep) {
        if (!s.ok()) return done(s);
        done(PreemptSent{rep.first(), rep.pushed()});
      });
}

void RendezvousClient::ReportFailure(uint64_t round, const std::string& host,
                                     const std::vector<WorkerFailureInfo>& failures, Duration timeout,
                                     std::function<void(const Status&)> done) {
  v1::ReportFailureRequest req;
  SetCaller(options_, req);
  req.set_round(round);
  req.set_host(host);
  for (const WorkerFailureInfo& f : failures) WorkerFailureToProto(f, req.add_failures());
  impl_->Unary<v1::ReportFailureRequest, v1::ReportFailureReply>(
      [](auto* a, grpc::ClientContext* c, const v1::ReportFailureRequest* q, v1::ReportFailureReply* r, auto cb) {
        a->ReportFailure(c, q, r, std::move(cb));
      },
      std::move(req), timeout, [done](const Status& s, const v1::ReportFailureReply&) { done(s); });
}

}  // namespace ctrun::rdzv
