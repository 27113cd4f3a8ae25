#include "rendezvous/grpc/client/client.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/client/call_status.h"
#include "rendezvous/grpc/client/client_calls.h"
#include "rendezvous/grpc/client/service_client.h"
#include "rendezvous/grpc/convert/failure_convert.h"
#include "rendezvous/grpc/convert/proto_convert.h"
#include "rendezvous/grpc/net/grpc_process.h"

namespace ctrun::rdzv {

namespace v1 = ::ctrun::rdzv::v1;

namespace {

Status FromGrpc(const grpc::Status& s, const std::string& endpoint) {
  return CallStatus(s, endpoint,
                    "give every node the CA that signed the server's certificate (tls_ca), a certificate that names "
                    "the endpoint's host (or set tls_server_name), and use TLS on both sides or on neither");
}

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
  Impl(const ClientOptions& options, Post post)
      : options_(options), rpc_(options_.endpoint, options_.tls, {}, FromGrpc, std::move(post)) {}

  // One Join stream (client_calls.h).
  class JoinCall final : public ReadCall<v1::Update> {
   public:
    JoinCall(Impl* impl, std::function<void(const Update&)> on_update, std::function<void(const Status&)> on_end)
        : ReadCall(impl->rpc_.calls(), std::move(on_end)), impl_(impl), on_update_(std::move(on_update)) {}

    void Start(const v1::JoinRequest& request, Reconnect reconnect) {
      request_ = request;
      context().set_wait_for_ready(true);
      if (reconnect != Reconnect::kNo) context().AddMetadata(kReconnectKey, std::string(ReconnectValue(reconnect)));
      impl_->rpc_.async()->Join(&context(), &request_, this);
      StartReading();
    }

   private:
    void OnMessage(const v1::Update& update) override {
      Post([cb = on_update_, u = DecisionFromUpdate(impl_->options_.node, update)] { cb(u); });
    }

    Impl* impl_;
    std::function<void(const Update&)> on_update_;
    v1::JoinRequest request_;
  };

  // The previous stream is not cancelled: a cancelled stream tells the
  // server this node is gone. The server ends it when the new Join arrives;
  // its callbacks are dropped from now on.
  void Join(const JoinArgs& a, std::function<void(const Update&)> on_update,
            std::function<void(const Status&)> on_end) {
    v1::JoinRequest req;
    SetCaller(options_, req);
    req.set_has_hint_rank(a.hint_rank.has_value());
    req.set_hint_rank(a.hint_rank.value_or(0));
    req.set_local_world_size(a.local_world_size);
    req.set_addr(a.addr);
    req.set_master_port(a.master_port);
    ParamsToProto(options_.params, req.mutable_params());
    auto* call = new JoinCall(this, std::move(on_update), std::move(on_end));
    call->Start(req, a.reconnect);
  }

  void CancelJoin() { rpc_.calls().CancelStreams(); }

  ClientOptions options_;
  ServiceClient rpc_;  // last: destroyed first, after every call is done
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
  impl_->rpc_.Unary<v1::KeepAliveRequest, v1::KeepAliveReply>(
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
  impl_->rpc_.Unary<v1::LeaveRequest, v1::LeaveReply>(
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
  impl_->rpc_.Unary<v1::StateRequest, v1::StateReply>(
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
  impl_->rpc_.Unary<v1::StateRequest, v1::StateReply>(
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
  impl_->rpc_.Unary<v1::PreemptRequest, v1::PreemptReply>(
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
  impl_->rpc_.Unary<v1::ReportFailureRequest, v1::ReportFailureReply>(
      [](auto* a, grpc::ClientContext* c, const v1::ReportFailureRequest* q, v1::ReportFailureReply* r, auto cb) {
        a->ReportFailure(c, q, r, std::move(cb));
      },
      std::move(req), timeout, [done](const Status& s, const v1::ReportFailureReply&) { done(s); });
}

}  // namespace ctrun::rdzv
