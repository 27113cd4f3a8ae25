// rdzv_load_jobs: N sequential two-node jobs against one rendezvous server
// (ctrund), as a long-lived daemon sees them, for its memory over time
// (bench/rendezvous.sh's daemon check).
//
// Each job is what two real agents send (launcher/rdzv/grpc_rendezvous.cc),
// without workers: both open a Join stream to a new run id (job-<i>, or one
// --run-id for every job) and read until the RoundComplete; each sends one
// keep-alive with a step report (so the run has step times and a straggler
// detector, as a job with heartbeats does); both leave with NORMAL_EXIT
// (the first closes the run) and end their streams. Two gRPC channels, one
// per "node", are kept for the whole series.
//
// Prints one JSON object on stdout: jobs done, seconds, and, with
// --server-pid, the server's VmRSS (KiB) after each --sample-every jobs and
// after the last. Exit 0 when every job got its round and close, 1 when not
// (the reason on stderr and in "error"), 2 for a bad argument.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "flag_reader.h"
#include "own_channel.h"
#include "rendezvous.grpc.pb.h"

namespace {

namespace v1 = ::ctrun::rdzv::v1;

struct Options {
  std::string endpoint;
  long jobs = 10000;
  long sample_every = 1000;
  std::string run_id;  // empty: job-<i>
  long server_pid = 0;
  double timeout_s = 10;  // per call
};

constexpr char kJobsUsage[] =
    "usage: rdzv_load_jobs --endpoint HOST:PORT [--jobs N] [--sample-every K] "
    "[--run-id ID] [--server-pid PID] [--timeout-s S]\n";

Options Parse(int argc, char** argv) {
  Options o;
  bench_load::FlagReader args(argc, argv, "rdzv_load_jobs", kJobsUsage);
  args.ReadAll([&](const std::string& flag) {
    const std::string& value = args.Value();
    if (flag == "--endpoint") o.endpoint = value;
    else if (flag == "--jobs") o.jobs = static_cast<long>(args.Number(1));
    else if (flag == "--sample-every") o.sample_every = static_cast<long>(args.Number(1));
    else if (flag == "--run-id") o.run_id = value;
    else if (flag == "--server-pid") o.server_pid = static_cast<long>(args.Number(1));
    else if (flag == "--timeout-s") o.timeout_s = args.Number(1);
    else return false;
    return true;
  });
  if (o.endpoint.empty()) args.Fail("--endpoint is required");
  return o;
}

long RssKib(long pid) {
  if (pid <= 0) return -1;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// One "node": its channel, kept for every job.
struct Node {
  std::string addr;
  std::unique_ptr<v1::Rendezvous::Stub> stub;
};

class Jobs {
 public:
  explicit Jobs(Options o) : o_(std::move(o)) {}
  int Run();

 private:
  std::chrono::system_clock::time_point Deadline() const {
    return std::chrono::system_clock::now() +
           std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(o_.timeout_s));
  }
  // One job; "" when it went as expected, else what did not.
  std::string OneJob(long index);

  Options o_;
  v1::RunParams params_;
  Node nodes_[2];
};

std::string Jobs::OneJob(long index) {
  const std::string run_id = o_.run_id.empty() ? "job-" + std::to_string(index) : o_.run_id;
  v1::JoinRequest join[2];
  grpc::ClientContext join_ctx[2];
  std::unique_ptr<grpc::ClientReader<v1::Update>> stream[2];
  for (int n = 0; n < 2; ++n) {
    join[n].set_version(v1::PROTOCOL_VERSION_3);
    join[n].set_run_id(run_id);
    join[n].mutable_node()->set_addr(nodes_[n].addr);
    join[n].mutable_node()->set_pid(getpid());
    join[n].set_incarnation(static_cast<uint64_t>(index) * 2 + static_cast<uint64_t>(n) + 1);
    join[n].set_local_world_size(1);
    join[n].set_addr(nodes_[n].addr);
    join[n].set_master_port(29500);
    *join[n].mutable_params() = params_;
    join_ctx[n].set_deadline(Deadline());
    stream[n] = nodes_[n].stub->Join(&join_ctx[n], join[n]);
  }
  for (int n = 0; n < 2; ++n) {
    v1::Update u;
    bool round = false;
    while (!round && stream[n]->Read(&u)) {
      if (u.has_round_complete()) round = true;
      else if (!u.has_admitted()) return "node " + std::to_string(n) + " got no round: " + u.ShortDebugString();
    }
    if (!round) return "node " + std::to_string(n) + ": Join stream ended: " + stream[n]->Finish().error_message();
  }
  for (int n = 0; n < 2; ++n) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    v1::KeepAliveRequest req;
    req.set_version(v1::PROTOCOL_VERSION_3);
    req.set_run_id(run_id);
    *req.mutable_node() = join[n].node();
    req.set_incarnation(join[n].incarnation());
    v1::StepReport* steps = req.mutable_steps();
    steps->set_round(0);
    steps->set_straggler_factor(2);
    steps->set_straggler_intervals(3);
    v1::RankStep* rank = steps->add_ranks();
    rank->set_rank(n);
    rank->set_step_s(0.1);
    rank->set_step_count(1);
    v1::KeepAliveReply rep;
    grpc::Status s = nodes_[n].stub->KeepAlive(&ctx, req, &rep);
    if (!s.ok() || rep.has_rejected()) return "keep-alive: " + s.error_message() + rep.rejected().message();
  }
  for (int n = 0; n < 2; ++n) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    v1::LeaveRequest req;
    req.set_version(v1::PROTOCOL_VERSION_3);
    req.set_run_id(run_id);
    *req.mutable_node() = join[n].node();
    req.set_incarnation(join[n].incarnation());
    req.set_reason(v1::LeaveRequest::NORMAL_EXIT);
    v1::LeaveReply rep;
    grpc::Status s = nodes_[n].stub->Leave(&ctx, req, &rep);
    if (!s.ok()) return "leave: " + s.error_message();
  }
  // The second node hears Closed (the first one's leave closed the run);
  // then both streams end, as the agents' do when they exit.
  v1::Update u;
  bool closed = false;
  while (!closed && stream[1]->Read(&u)) closed = u.has_closed();
  if (!closed) return "node 1 got no Closed";
  for (int n = 0; n < 2; ++n) {
    join_ctx[n].TryCancel();
    while (stream[n]->Read(&u)) {
    }
    stream[n]->Finish();
  }
  return "";
}

int Jobs::Run() {
  params_.set_min_nodes(2);
  params_.set_max_nodes(2);
  params_.set_join_timeout_s(o_.timeout_s);
  params_.set_last_call_timeout_s(1);
  params_.set_close_timeout_s(30);
  params_.set_keep_alive_interval_s(5);
  params_.set_keep_alive_max_attempt(3);
  for (int n = 0; n < 2; ++n) {
    nodes_[n].addr = "10.0.0." + std::to_string(n + 1);
    nodes_[n].stub = v1::Rendezvous::NewStub(bench_load::OwnChannel(o_.endpoint));  // as two hosts have
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::pair<long, long>> samples;  // (jobs done, server VmRSS KiB)
  std::string error;
  long done = 0;
  while (done < o_.jobs && error.empty()) {
    error = OneJob(done);
    if (!error.empty()) break;
    ++done;
    if (done % o_.sample_every == 0 || done == o_.jobs) samples.emplace_back(done, RssKib(o_.server_pid));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ostringstream j;
  j << "{\"ok\": " << (error.empty() ? "true" : "false") << ", \"jobs\": " << done << ", \"seconds\": " << secs
    << ", \"rss_kib\": [";
  for (size_t i = 0; i < samples.size(); ++i) {
    j << (i ? ", " : "") << "[" << samples[i].first << ", " << samples[i].second << "]";
  }
  for (char& c : error) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = '\'';
  }
  j << "], \"error\": \"" << error << "\"}";
  std::printf("%s\n", j.str().c_str());
  if (!error.empty()) std::fprintf(stderr, "rdzv_load_jobs: job %ld: %s\n", done, error.c_str());
  return error.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return Jobs(Parse(argc, argv)).Run(); }
