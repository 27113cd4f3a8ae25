// GrpcRendezvous: leaving the run (Shutdown) and the exit barrier of the
// node that hosts it (grpc_rendezvous.h).
#include "launcher/rdzv/grpc_rendezvous.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <chrono>
#include <utility>

namespace ctrun::launcher {

void GrpcRendezvous::Shutdown(ShutdownReason reason, std::function<void()> done) {
  EnterShutdown(phase_, {join_timer_, reconnect_timer_, keep_alive_timer_, status_timer_});
  const rdzv::LeaveReason leave = ToLeaveReason(reason);
  // On a signal, leave promptly: the peers learn of it from the keep-alives
  // anyway. A server that did not answer the last Join (or was lost while
  // the workers ran) will not answer a Leave either: do not wait
  // close_timeout for it after join_timeout has passed already.
  const bool unanswered = reconnecting_ || !heard_;
  const Duration timeout = reason == ShutdownReason::kSignal || unanswered
                               ? std::min(ToDuration(options_.close_timeout), kSignalLeaveTimeout)
                               : ToDuration(options_.close_timeout);
  auto after_leave = [this, done, unanswered](const Status& s) {
    // FailedPrecondition: the server refused this node (token, TLS, version),
    // which the join failure already said; there is nothing to leave. An
    // unanswered server was reported already too.
    if (!s.ok() && s.code() != Status::Code::kFailedPrecondition && !unanswered) {
      spdlog::warn("could not leave the rendezvous: {}", s.message());
    }
    client_->CancelJoin();
    if (!hosted_) {
      done();
      return;
    }
    ExitBarrier(done);
  };
  // A refused node never joined; a Leave would only wait out its timeout.
  if (refused_) return after_leave(Status::Ok());
  auto send_leave = [this, leave, timeout, after_leave, reason] {
    client_->Leave(leave, timeout, after_leave,
                   reason == ShutdownReason::kUnhealthy ? unhealthy_report_ : std::string(),
                   reason == ShutdownReason::kFailed ? failure_verdict_ : std::nullopt);
  };
  // A failure report sent just before must reach the server first: the
  // node's last word is its Leave.
  if (reports_in_flight_ > 0) {
    after_reports_ = std::move(send_leave);
    return;
  }
  send_leave();
}

// The hosting agent keeps serving until the other nodes are gone.
void GrpcRendezvous::ExitBarrier(std::function<void()> done) {
  barrier_done_ = std::move(done);
  barrier_timer_.expires_after(ToDuration(options_.exit_barrier_timeout));
  barrier_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) EndBarrier(/*drained=*/false);
  });
  std::weak_ptr<bool> alive = alive_;
  boost::asio::io_context& io = io_;
  hosted_->WhenDrained([&io, alive, this] {
    boost::asio::post(io, [alive, this] {
      if (alive.lock()) EndBarrier(/*drained=*/true);
    });
  });
}

void GrpcRendezvous::EndBarrier(bool drained) {
  if (!barrier_done_) return;
  barrier_timer_.cancel();
  if (!drained) {
    spdlog::warn("exit barrier: other nodes are still in the run after {} s; stopping the "
                 "rendezvous server (--exit-barrier-timeout)",
                 options_.exit_barrier_timeout.count());
  }
  hosted_->Stop();
  hosted_.reset();
  auto done = std::move(barrier_done_);
  barrier_done_ = nullptr;
  done();
}

}  // namespace ctrun::launcher
