#include "rendezvous/client.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "rendezvous.grpc.pb.h"

namespace ctrun::rdzv {

namespace v1 = ::ctrun::rdzv::v1;

namespace {

NodeId FromProto(const v1::NodeId& n) { return NodeId{n.addr(), n.pid(), n.local_id()}; }

void ToProto(const NodeId& n, v1::NodeId* out) {
  out->set_addr(n.addr);
  out->set_pid(n.pid);
  out->set_local_id(n.local_id);
}

double Secs(Duration d) { return std::chrono::duration<double>(d).count(); }

Status FromGrpc(const grpc::Status& s, const std::string& endpoint) {
  if (s.ok()) return Status::Ok();
  const std::string what = s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
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

Rejected RejectedFromProto(const NodeId& self, const v1::Rejected& r) {
  Rejected out;
  out.node = self;
  out.message = r.message();
  switch (r.code()) {
    case v1::Rejected::CLOSED: out.code = RejectCode::kClosed; break;
    case v1::Rejected::DUPLICATE_NODE: out.code = RejectCode::kDuplicateNode; break;
    case v1::Rejected::UNKNOWN_NODE: out.code = RejectCode::kUnknownNode; break;
    default: out.code = RejectCode::kInvalidJoin; break;
  }
  return out;
}

Update UpdateFromProto(const NodeId& self, const v1::Update& u) {
  switch (u.kind_case()) {
    case v1::Update::kAdmitted: {
      Admitted a{self, AdmitState::kParticipant, u.admitted().round()};
      if (u.admitted().state() == v1::Admitted::WAITING) a.state = AdmitState::kWaiting;
      if (u.admitted().state() == v1::Admitted::REDUNDANT) a.state = AdmitState::kRedundant;
      return a;
    }
    case v1::Update::kRoundComplete: {
      const v1::RoundComplete& rc = u.round_complete();
      RoundComplete out;
      out.round = rc.round();
      out.world_size = rc.world_size();
      out.hint_note = rc.hint_note();
      for (const v1::Member& m : rc.members()) {
        Member member;
        member.node = FromProto(m.node());
        member.group_rank = m.group_rank();
        member.local_world_size = m.local_world_size();
        member.addr = m.addr();
        member.master_port = m.master_port();
        out.members.push_back(std::move(member));
      }
      return out;
    }
    case v1::Update::kRestartRequested: {
      const v1::RestartRequested& r = u.restart_requested();
      RestartRequested out;
      out.round = r.round();
      out.cause = FromProto(r.cause());
      out.nodes = {self};
      out.reason = r.reason() == v1::RestartRequested::NODE_JOINED ? RestartReason::kNodeJoinedWaitList
                   : r.reason() == v1::RestartRequested::NODE_LOST ? RestartReason::kNodeLost
                                                                   : RestartReason::kNodeLeft;
      return out;
    }
    case v1::Update::kRejected:
      return RejectedFromProto(self, u.rejected());
    case v1::Update::kTimedOut:
      return TimedOut{self, u.timed_out().message()};
    case v1::Update::kEvicted:
      return Evicted{self, u.evicted().message()};
    case v1::Update::kClosed:
    case v1::Update::KIND_NOT_SET:
      break;
  }
  return Closed{u.closed().round(), {self}};
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

}  // namespace

class RendezvousClient::Impl {
 public:
  Impl(const ClientOptions& options, Post post) : options_(options), post_(std::move(post)) {
    grpc::ChannelArguments args;
    // Find a server that starts late quickly, instead of backing off to 2 min.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    channel_ = grpc::CreateCustomChannel(options_.endpoint, grpc::InsecureChannelCredentials(), args);
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

    void Start(const v1::JoinRequest& request) {
      request_ = request;
      ctx_.set_wait_for_ready(true);
      impl_->stub_->async()->Join(&ctx_, &request_, this);
      StartRead(&update_);
      StartCall();
    }
    void Cancel() { ctx_.TryCancel(); }

    void OnReadDone(bool ok) override {
      if (!ok) return;  // OnDone follows
      Update u = UpdateFromProto(impl_->options_.node, update_);
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
    req.set_version(v1::PROTOCOL_VERSION_1);
    req.set_run_id(options_.run_id);
    ToProto(options_.node, req.mutable_node());
    req.set_incarnation(options_.incarnation);
    req.set_has_hint_rank(a.hint_rank.has_value());
    req.set_hint_rank(a.hint_rank.value_or(0));
    req.set_local_world_size(a.local_world_size);
    req.set_addr(a.addr);
    req.set_master_port(a.master_port);
    req.set_token(options_.token);
    v1::RunParams* p = req.mutable_params();
    p->set_min_nodes(options_.params.min_nodes);
    p->set_max_nodes(options_.params.max_nodes);
    p->set_join_timeout_s(Secs(options_.params.join_timeout));
    p->set_last_call_timeout_s(Secs(options_.params.last_call_timeout));
    p->set_close_timeout_s(Secs(options_.params.close_timeout));
    p->set_keep_alive_interval_s(Secs(options_.params.keep_alive_interval));
    p->set_keep_alive_max_attempt(options_.params.keep_alive_max_attempt);

    join_stale_ = std::make_shared<std::atomic<bool>>(false);
    auto* call = new JoinCall(this, join_stale_, std::move(on_update), std::move(on_end));
    tracker_.Begin();
    {
      std::lock_guard<std::mutex> lock(mu_);
      joins_.insert(call);
    }
    call->Start(req);
  }

  void CancelJoin() {
    if (join_stale_) *join_stale_ = true;
    std::lock_guard<std::mutex> lock(mu_);
    for (JoinCall* call : joins_) call->Cancel();
  }

  // Runs one unary call with the callback API; `finish` maps the reply.
  // `method(async_stub, ctx, req, rep, callback)` starts the call.
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
    : options_(std::move(options)), impl_(std::make_unique<Impl>(options_, std::move(post))) {}

RendezvousClient::~RendezvousClient() = default;

void RendezvousClient::Join(const JoinArgs& args, std::function<void(const Update&)> on_update,
                            std::function<void(const Status&)> on_end) {
  impl_->Join(args, std::move(on_update), std::move(on_end));
}

void RendezvousClient::CancelJoin() { impl_->CancelJoin(); }

void RendezvousClient::KeepAlive(std::function<void(const Status&)> done) {
  v1::KeepAliveRequest req;
  req.set_version(v1::PROTOCOL_VERSION_1);
  req.set_run_id(options_.run_id);
  ToProto(options_.node, req.mutable_node());
  req.set_incarnation(options_.incarnation);
  req.set_token(options_.token);
  const NodeId self = options_.node;
  impl_->Unary<v1::KeepAliveRequest, v1::KeepAliveReply>(
      [](auto* a, grpc::ClientContext* c, const v1::KeepAliveRequest* q, v1::KeepAliveReply* r, auto cb) { a->KeepAlive(c, q, r, std::move(cb)); }, std::move(req),
      options_.params.keep_alive_interval,
      [done, self](const Status& s, const v1::KeepAliveReply& rep) {
        if (!s.ok()) return done(s);
        if (rep.has_rejected()) return done(ToStatus(RejectedFromProto(self, rep.rejected())));
        done(Status::Ok());
      });
}

void RendezvousClient::Leave(LeaveReason reason, Duration timeout,
                             std::function<void(const Status&)> done) {
  v1::LeaveRequest req;
  req.set_version(v1::PROTOCOL_VERSION_1);
  req.set_run_id(options_.run_id);
  ToProto(options_.node, req.mutable_node());
  req.set_incarnation(options_.incarnation);
  req.set_token(options_.token);
  req.set_reason(reason == LeaveReason::kNormalExit ? v1::LeaveRequest::NORMAL_EXIT
                 : reason == LeaveReason::kSignal   ? v1::LeaveRequest::SIGNAL
                                                    : v1::LeaveRequest::FAILURE);
  impl_->Unary<v1::LeaveRequest, v1::LeaveReply>(
      [](auto* a, grpc::ClientContext* c, const v1::LeaveRequest* q, v1::LeaveReply* r, auto cb) { a->Leave(c, q, r, std::move(cb)); }, std::move(req), timeout,
      [done](const Status& s, const v1::LeaveReply&) { done(s); });
}

void RendezvousClient::GetState(Duration timeout,
                                std::function<void(const Result<RunState>&)> done) {
  v1::StateRequest req;
  req.set_version(v1::PROTOCOL_VERSION_1);
  req.set_run_id(options_.run_id);
  req.set_token(options_.token);
  impl_->Unary<v1::StateRequest, v1::StateReply>(
      [](auto* a, grpc::ClientContext* c, const v1::StateRequest* q, v1::StateReply* r, auto cb) { a->GetState(c, q, r, std::move(cb)); }, std::move(req), timeout,
      [done](const Status& s, const v1::StateReply& rep) {
        if (!s.ok()) return done(s);
        RunState st;
        st.round = rep.round();
        st.complete = rep.complete();
        st.closed = rep.closed();
        st.min_nodes = rep.min_nodes();
        st.max_nodes = rep.max_nodes();
        st.participants = rep.participants_size();
        st.live_nodes = rep.live_nodes();
        st.last_call_in_s = rep.last_call_in_s();
        done(st);
      });
}

}  // namespace ctrun::rdzv
