// logs_load: N simulated nodes shipping their workers' lines to one
// rendezvous server (ctrund) with --share-logs' protocol, for the server's
// CPU, memory and its readers at scale (bench/logs_scale.sh).
//
// What goes on the wire is what the agent's shipper sends
// (launcher/logs/ship/, rendezvous/grpc/client/log_client.cc): one ShipLogs
// stream per node, a LogBatch every --interval-ms (the agent's
// kShipInterval) carrying one LogChunk per rank with the lines that rank
// wrote since the last batch (the agent merges a stream's chunks, so a
// rank's lines of one interval are one chunk), the header (version, run,
// token, node, host label) on the first batch only. Each rank writes --rate
// lines a second for --duration-s (logs_load_lines.h: ~100 bytes, stamped
// with rank, line number and send time); node i's batches go at
// i/N of an interval after the tick, so the nodes do not send in lockstep.
// The run is held by RunHolder (logs_load_holder.h). Every stream gets its
// own gRPC channel (a connection, as each node has) unless --channels says
// fewer; --threads senders share the nodes, sending with the synchronous
// API, so a server that does not keep up slows them (measured as lateness),
// as flow control slows a real shipper before its queue drops.
//
// Bounded: the lines are nodes x ranks x rate x duration (at most 1e9),
// every call has a deadline (the run's length plus --timeout-s); loopback
// or any endpoint given, nothing else. Stops by itself.
//
// Prints "ready" on stdout once the run is held and the streams are open,
// "start" when the first batch is due (--start-delay-s later), and at the
// end one JSON object: lines sent,
// lines the server says it accepted (ShipLogsReply.accepted), bytes,
// batches, the senders' lateness, seconds, error. Exit 0 when every stream
// ended OK with every line accepted, 1 when not (the reason on stderr and
// in "error"), 2 for a bad argument.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "logs_load_holder.h"
#include "logs_load_lines.h"
#include "logs_load_options.h"
#include "own_channel.h"

namespace logs_load {
namespace {

using SteadyClock = std::chrono::steady_clock;

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct Node {
  int index = 0;
  std::string host;  // its lines' label
  grpc::ClientContext ctx;
  v1::ShipLogsReply reply;
  std::unique_ptr<grpc::ClientWriter<v1::LogBatch>> writer;
  bool first = true;
  bool broken = false;
};

// What one sender thread did.
struct SenderTotals {
  long lines = 0;
  long batches = 0;
  double bytes = 0;
  double late_max_s = 0;
  double late_sum_s = 0;
  long late_batches = 0;  // sent over one interval after their time
};

// What a run did, for the report.
struct Outcome {
  SenderTotals sum;
  long expected = 0;  // lines every rank together should have sent
  long accepted = 0;  // lines the server says it took
  int failed = 0;     // streams that did not end OK
  int keep_alive_errors = 0;
  double seconds = 0;  // of shipping
  double total_s = 0;  // with the join and the streams' ends
};

class Load {
 public:
  explicit Load(Options o) : o_(std::move(o)) {}
  int Run();

 private:
  // Lines each rank writes in tick k.
  long Due(long k) const {
    const double end = o_.duration_s;
    const double a = std::min(static_cast<double>(k) * interval_s_, end);
    const double b = std::min(static_cast<double>(k + 1) * interval_s_, end);
    return static_cast<long>(std::floor(o_.rate * b)) - static_cast<long>(std::floor(o_.rate * a));
  }
  void Send(int thread, SteadyClock::time_point t0, SenderTotals& totals);
  void SendBatch(Node& n, long first_line, long lines, v1::LogBatch& batch, SenderTotals& totals);
  void Fail(const std::string& what);
  // Checks the counts, prints the JSON report; the exit code.
  int Report(const Outcome& r);

  Options o_;
  double interval_s_ = 0.05;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::Rendezvous::Stub>> stubs_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<LineMaker> makers_;  // by global rank
  std::mutex mu_;
  std::string error_;  // guarded by mu_
};

void Load::Fail(const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.empty()) error_ = what;
}

void Load::SendBatch(Node& n, long first_line, long lines, v1::LogBatch& batch, SenderTotals& totals) {
  batch.Clear();
  if (n.first) {
    batch.set_version(v1::PROTOCOL_VERSION_3);
    batch.set_run_id(o_.run_id);
    batch.mutable_node()->set_addr(n.host.substr(0, n.host.find('#')));
    batch.mutable_node()->set_pid(getpid());
    batch.set_host(n.host);
    n.first = false;
  }
  const double now = UnixNow();
  for (int r = 0; r < o_.ranks; ++r) {
    const int rank = n.index * o_.ranks + r;
    v1::LogChunk* c = batch.add_chunks();
    c->set_rank(rank);
    c->set_local_rank(r);
    c->set_unix_s(now);
    makers_[static_cast<size_t>(rank)].Append(*c->mutable_text(), first_line, lines, now);
  }
  const size_t bytes = batch.ByteSizeLong();
  if (!n.writer->Write(batch)) {
    n.broken = true;
    return;
  }
  totals.lines += lines * o_.ranks;
  totals.bytes += static_cast<double>(bytes);
  ++totals.batches;
}

void Load::Send(int thread, SteadyClock::time_point t0, SenderTotals& totals) {
  const long ticks = static_cast<long>(std::ceil(o_.duration_s / interval_s_ - 1e-9));
  v1::LogBatch batch;
  long first_line = 0;  // every rank's next line number (all ranks write alike)
  for (long k = 0; k < ticks; ++k) {
    const long due = Due(k);
    for (size_t i = static_cast<size_t>(thread); i < nodes_.size(); i += static_cast<size_t>(o_.threads)) {
      Node& n = *nodes_[i];
      const double phase = (static_cast<double>(k) + static_cast<double>(i) / static_cast<double>(nodes_.size())) *
                           interval_s_;
      const auto at = t0 + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(phase));
      std::this_thread::sleep_until(at);
      const double late = std::chrono::duration<double>(SteadyClock::now() - at).count();
      totals.late_max_s = std::max(totals.late_max_s, late);
      totals.late_sum_s += late;
      if (late > interval_s_) ++totals.late_batches;
      if (due > 0 && !n.broken) SendBatch(n, first_line, due, batch, totals);
    }
    first_line += due;
  }
}

int Load::Run() {
  interval_s_ = o_.interval_ms / 1e3;
  for (int c = 0; c < o_.channels; ++c) {
    channels_.push_back(bench_load::OwnChannel(o_.endpoint));
    stubs_.push_back(v1::Rendezvous::NewStub(channels_.back()));
  }
  for (int r = 0; r < o_.nodes * o_.ranks; ++r) makers_.emplace_back(r);
  RunHolder holder(channels_[0]);
  const auto started = SteadyClock::now();
  std::string error = holder.Start(o_.run_id, o_.timeout_s);
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::duration_cast<std::chrono::system_clock::duration>(
                            std::chrono::duration<double>(o_.start_delay_s + o_.duration_s + o_.timeout_s));
  for (int i = 0; error.empty() && i < o_.nodes; ++i) {
    auto n = std::make_unique<Node>();
    n->index = i;
    n->host = "10." + std::to_string(1 + i / 65536) + "." + std::to_string(i / 256 % 256) + "." +
              std::to_string(i % 256) + "#" + std::to_string(10000 + i);
    n->ctx.set_deadline(deadline);
    n->writer = stubs_[static_cast<size_t>(i % o_.channels)]->ShipLogs(&n->ctx, &n->reply);
    nodes_.push_back(std::move(n));
  }
  std::vector<SenderTotals> totals(static_cast<size_t>(o_.threads));
  double seconds = 0;
  if (error.empty()) {
    std::printf("ready\n");
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::duration<double>(o_.start_delay_s));
    const auto t0 = SteadyClock::now();
    std::printf("start\n");
    std::fflush(stdout);
    std::vector<std::thread> senders;
    for (int t = 0; t < o_.threads; ++t) senders.emplace_back([&, t] { Send(t, t0, totals[static_cast<size_t>(t)]); });
    for (std::thread& t : senders) t.join();
    seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  }
  long accepted = 0;
  int failed = 0;
  for (auto& n : nodes_) {
    n->writer->WritesDone();
    const grpc::Status s = n->writer->Finish();
    accepted += static_cast<long>(n->reply.accepted());
    if (!s.ok() || n->broken) {
      ++failed;
      Fail("node " + n->host + ": its log stream ended: " + (s.ok() ? "a write failed" : s.error_message()));
    }
  }
  holder.Stop();
  SenderTotals sum;
  for (const SenderTotals& t : totals) {
    sum.lines += t.lines;
    sum.batches += t.batches;
    sum.bytes += t.bytes;
    sum.late_max_s = std::max(sum.late_max_s, t.late_max_s);
    sum.late_sum_s += t.late_sum_s;
    sum.late_batches += t.late_batches;
  }
  if (!error.empty()) Fail(error);
  const Outcome outcome{sum, error.empty() ? static_cast<long>(o_.nodes) * o_.ranks * LinesPerRank(o_) : 0, accepted,
                        failed, holder.keep_alive_errors(), seconds,
                        std::chrono::duration<double>(SteadyClock::now() - started).count()};
  return Report(outcome);
}

int Load::Report(const Outcome& r) {
  if (error_.empty() && r.sum.lines != r.expected) {
    Fail("sent " + std::to_string(r.sum.lines) + " lines, not " + std::to_string(r.expected));
  }
  if (error_.empty() && r.accepted != r.sum.lines) {
    Fail("the server accepted " + std::to_string(r.accepted) + " of " + std::to_string(r.sum.lines) + " lines");
  }
  const double ticks = std::max(1.0, static_cast<double>(nodes_.size()) * std::ceil(o_.duration_s / interval_s_ - 1e-9));
  for (char& c : error_) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = '\'';
  }
  std::ostringstream j;
  j << "{\"ok\": " << (error_.empty() ? "true" : "false") << ", \"nodes\": " << o_.nodes << ", \"ranks\": " << o_.ranks
    << ", \"rate\": " << o_.rate << ", \"duration_s\": " << o_.duration_s << ", \"lines_sent\": " << r.sum.lines
    << ", \"lines_expected\": " << r.expected << ", \"accepted\": " << r.accepted << ", \"batches\": " << r.sum.batches
    << ", \"wire_bytes\": " << static_cast<long long>(r.sum.bytes) << ", \"seconds\": " << r.seconds
    << ", \"late_max_s\": " << r.sum.late_max_s << ", \"late_mean_s\": " << r.sum.late_sum_s / ticks
    << ", \"late_batches\": " << r.sum.late_batches << ", \"failed_streams\": " << r.failed
    << ", \"keep_alive_errors\": " << r.keep_alive_errors << ", \"total_s\": " << r.total_s << ", \"error\": \""
    << error_ << "\"}";
  std::printf("%s\n", j.str().c_str());
  if (!error_.empty()) std::fprintf(stderr, "logs_load: %s\n", error_.c_str());
  return error_.empty() ? 0 : 1;
}

}  // namespace
}  // namespace logs_load

int main(int argc, char** argv) { return logs_load::Load(logs_load::Parse(argc, argv)).Run(); }
