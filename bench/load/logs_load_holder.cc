#include "logs_load_holder.h"

#include <unistd.h>

#include <chrono>

namespace logs_load {
namespace {

constexpr double kKeepAliveS = 5;

std::chrono::system_clock::time_point After(double s) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

std::string RunHolder::Start(const std::string& run_id, double timeout_s) {
  join_.set_version(v1::PROTOCOL_VERSION_3);
  join_.set_run_id(run_id);
  join_.mutable_node()->set_addr("logs-load-holder");
  join_.mutable_node()->set_pid(getpid());
  join_.set_incarnation(1);
  join_.set_local_world_size(1);
  join_.set_master_port(29500);
  v1::RunParams* p = join_.mutable_params();
  p->set_min_nodes(1);
  p->set_max_nodes(1);
  p->set_join_timeout_s(timeout_s);
  p->set_last_call_timeout_s(1);
  p->set_close_timeout_s(30);
  p->set_keep_alive_interval_s(kKeepAliveS);
  p->set_keep_alive_max_attempt(3);
  stream_ = stub_->Join(&ctx_, join_);
  // The round, or the stream's end: bounded by a timer that cancels the call.
  std::mutex m;
  std::condition_variable cv;
  bool got = false;
  std::thread timer([&] {
    std::unique_lock<std::mutex> lock(m);
    if (!cv.wait_until(lock, After(timeout_s), [&] { return got; })) ctx_.TryCancel();
  });
  v1::Update u;
  bool round = false;
  while (!round && stream_->Read(&u)) round = u.has_round_complete();
  {
    std::lock_guard<std::mutex> lock(m);
    got = true;
  }
  cv.notify_all();
  timer.join();
  if (!round) {
    const grpc::Status s = stream_->Finish();
    stream_.reset();
    return "the run's Join ended before its round: " + (s.ok() ? std::string("no error") : s.error_message());
  }
  reader_ = std::thread([this] {
    v1::Update update;
    while (stream_->Read(&update)) {
    }
  });
  keeper_ = std::thread([this] { KeepAlives(); });
  return "";
}

void RunHolder::KeepAlives() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_until(lock, After(kKeepAliveS), [this] { return stop_; })) {
    lock.unlock();
    grpc::ClientContext ctx;
    ctx.set_deadline(After(kKeepAliveS));
    v1::KeepAliveRequest req;
    req.set_version(v1::PROTOCOL_VERSION_3);
    req.set_run_id(join_.run_id());
    *req.mutable_node() = join_.node();
    req.set_incarnation(join_.incarnation());
    v1::KeepAliveReply rep;
    const grpc::Status s = stub_->KeepAlive(&ctx, req, &rep);
    lock.lock();
    if (!s.ok() || rep.has_rejected()) ++keep_alive_errors_;
  }
}

void RunHolder::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (keeper_.joinable()) keeper_.join();
  if (!stream_) return;
  ctx_.TryCancel();
  if (reader_.joinable()) reader_.join();
  (void)stream_->Finish();
}

int RunHolder::keep_alive_errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return keep_alive_errors_;
}

}  // namespace logs_load
