// GrpcRendezvous: what it tells the run of this node (a preemption notice,
// its failures) and the verdict it asks of it (grpc_rendezvous.h).
#include "launcher/rdzv/grpc_rendezvous.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <chrono>
#include <utility>

namespace ctrun::launcher {

void GrpcRendezvous::SendPreemptNotice(const PreemptNotice& notice) {
  preempt_heard_ = true;  // this node knows already: a notice from another node is not news
  const Duration timeout = std::min<Duration>(ToDuration(options_.close_timeout), kPreemptSendTimeout);
  client_->Preempt(notice.remaining_s, notice.source, timeout,
                   [endpoint = options_.client.endpoint](const Result<rdzv::RendezvousClient::PreemptSent>& sent) {
                     if (!sent.ok()) {
                       spdlog::warn("could not tell the other nodes of the preemption notice through the "
                                    "rendezvous at {}: {}",
                                    endpoint, sent.status().message());
                     } else if (sent->first) {
                       spdlog::info("told the other nodes of the preemption notice ({} other node{} in the run)",
                                    sent->pushed, sent->pushed == 1 ? "" : "s");
                     } else {
                       spdlog::info("the other nodes were told of a preemption notice already");
                     }
                   });
}

void GrpcRendezvous::ReportFailures(const FailureReport& report) {
  if (refused_) return;
  // A request holds at most kMaxFailuresPerReport failures.
  for (size_t from = 0; from < report.failures.size(); from += rdzv::kMaxFailuresPerReport) {
    const size_t to = std::min(report.failures.size(), from + rdzv::kMaxFailuresPerReport);
    SendFailures(report.round, report.host, {report.failures.begin() + from, report.failures.begin() + to});
  }
}

void GrpcRendezvous::SendFailures(int round, const std::string& host,
                                  const std::vector<rdzv::WorkerFailureInfo>& failures) {
  const Duration timeout = std::min<Duration>(ToDuration(options_.close_timeout), kPreemptSendTimeout);
  ++reports_in_flight_;
  client_->ReportFailure(static_cast<uint64_t>(round), host, failures, timeout,
                         [this, n = failures.size()](const Status& s) {
                           if (!s.ok()) {
                             spdlog::warn("could not report {} failed worker{} to the rendezvous at {}: {}", n,
                                          n == 1 ? "" : "s", options_.client.endpoint, s.message());
                           }
                           if (--reports_in_flight_ == 0 && after_reports_) {
                             std::function<void()> leave = std::move(after_reports_);
                             after_reports_ = nullptr;
                             leave();
                           }
                         });
}

namespace {

// A cause another node's failure may explain: this node asks the server.
bool MayBeConsequence(rdzv::FailureClass cls) {
  return cls == rdzv::FailureClass::kConnectionError || cls == rdzv::FailureClass::kNcclError ||
         cls == rdzv::FailureClass::kStopped || cls == rdzv::FailureClass::kUnknown;
}

}  // namespace

void GrpcRendezvous::ResolveVerdict(std::optional<rdzv::VerdictSummary> local,
                                    std::function<void(std::optional<rdzv::VerdictSummary>)> done) {
  if ((local && !MayBeConsequence(local->cls)) || refused_) return done(std::move(local));
  if (closed_verdict_) return done(closed_verdict_);
  // The node that failed first prints its verdict and leaves with it: the
  // run's Closed brings it (Handle(Closed)), so every node prints the same
  // line. Until kVerdictWait, then the server is asked once.
  verdict_done_ = std::move(done);
  verdict_timer_.expires_after(kVerdictWait);
  verdict_timer_.async_wait([this, local = std::move(local)](const boost::system::error_code& ec) {
    if (!ec && verdict_done_) AskVerdict(local);
  });
}

void GrpcRendezvous::AskVerdict(std::optional<rdzv::VerdictSummary> local) {
  // No node closed the run with its verdict in time (it was lost, or
  // restarts on): the server's, when it names a cause, else this node's own.
  client_->GetStatus(kVerdictAskTimeout, [this, alive = alive_, local](const Result<rdzv::RunView>& view) {
    if (!*alive || !verdict_done_) return;
    std::optional<rdzv::VerdictSummary> server;
    if (view.ok()) server = rdzv::SummarizeFailures(view->failures);
    auto done = std::move(verdict_done_);
    verdict_done_ = nullptr;
    done(closed_verdict_ ? closed_verdict_ : server && !MayBeConsequence(server->cls) ? std::move(server) : local);
  });
}

}  // namespace ctrun::launcher
