// store_load's mix mode: see store_load_modes.h and store_load.cc. MixRun
// holds one run's state; its methods are the steps of the old closed loop:
// Next queues a connection's next request, OnReply checks a reply against
// what the protocol says it must be, Finished moves the timed window.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "store_load_loop.h"
#include "store_load_modes.h"

namespace store_load {

namespace {

using ctrun::rdzv::StoreOp;

// A value of `bytes` bytes that says which connection, cycle and side wrote it.
void Stamp(std::string& v, size_t bytes, int conn, long cycle, char side) {
  if (v.size() != bytes) v.assign(bytes, 'x');
  char head[32];
  std::snprintf(head, sizeof(head), "%c%07x%08lx", side, conn & 0xfffffff, cycle & 0xffffffffL);
  std::memcpy(v.data(), head, 16);
}

class MixRun {
 public:
  explicit MixRun(const Options& o)
      : o_(o), loop_(o), conns_(static_cast<size_t>(o.conns)), total_key_("/" + o.prefix + "/total") {
    timed_ = o.seconds > 0;
    start_ = Clock::now();
    measuring_ = !timed_;
    cpu0_ = timed_ ? Cpu{} : ServerCpu(o.server_pid);
    if (!timed_) window_start_ = start_;
  }

  int Run() {
    if (!ConnectAll()) return 1;
    const bool ran = loop_.Run([&](Conn& c) { Next(c); },
                               [&](Conn& c, const StoreRequest& req, const StoreReply& r) { OnReply(c, req, r); },
                               [&]() { return Finished(); });
    if (window_end_ == Clock::time_point{}) window_end_ = Clock::now();
    const Cpu cpu = ServerCpu(o_.server_pid) - cpu0_;
    if (ran && loop_.errors() == 0) CheckTotal();
    for (Conn& c : conns_) loop_.Close(c);
    Print(cpu);
    return loop_.errors() == 0 && ran ? 0 : 1;
  }

 private:
  // Fills each connection's requests and starts its connect.
  bool ConnectAll() {
    for (size_t i = 0; i < conns_.size(); ++i) {
      Conn& c = conns_[i];
      const std::string key = "/" + o_.prefix + "/k" + std::to_string(i);
      c.set.op = StoreOp::kSet;
      c.set.keys = {key};
      c.set.values = {std::string()};
      c.get.op = StoreOp::kGet;
      c.get.keys = {key};
      c.add.op = StoreOp::kAdd;
      c.add.keys = {total_key_};
      c.add.number = 1;
      c.wait.op = StoreOp::kWait;
      c.wait.keys = {key};
      c.cas.op = StoreOp::kCompareSet;
      c.cas.keys = {key};
      c.cas.values = {std::string(), std::string()};
      if (!loop_.Connect(c)) return false;
    }
    return true;
  }

  void MarkDone(Conn& c) {
    if (!c.done) {
      c.done = true;
      ++finished_;
    }
  }

  // Queues the connection's next step, or marks it done.
  void Next(Conn& c) {
    const int id = static_cast<int>(&c - conns_.data());
    if (stopping_ || (!timed_ && c.cycle >= o_.cycles)) {
      MarkDone(c);
      return;
    }
    c.sent = Clock::now();
    switch (c.step) {
      case 0:
        Stamp(c.set.values[0], o_.value_bytes, id, c.cycle, 'v');
        loop_.Queue(c, c.set);
        loop_.Queue(c, c.get);
        break;
      case 1: loop_.Queue(c, c.add); break;
      case 2: loop_.Queue(c, c.wait); break;
      case 3:
        c.cas.values[0] = c.set.values[0];
        Stamp(c.cas.values[1], o_.value_bytes, id, c.cycle, 'w');
        loop_.Queue(c, c.cas);
        break;
    }
  }

  // An ADD's result must grow on its connection and never come twice.
  bool CheckAdd(Conn& c, const StoreRequest& req, const StoreReply& r) {
    bool ok = true;
    ++adds_;
    if (r.number < 1 || r.number <= c.last_add) {
      ok = false;
      loop_.Problem("ADD " + req.keys[0] + " returned " + std::to_string(r.number) + " after " +
                    std::to_string(c.last_add));
    } else {
      const size_t at = static_cast<size_t>(r.number);
      if (at >= seen_add_.size()) seen_add_.resize(at * 2 + 1);
      if (seen_add_[at]) {
        ok = false;
        loop_.Problem("ADD " + req.keys[0] + " returned " + std::to_string(r.number) + " twice");
      }
      seen_add_[at] = true;
    }
    c.last_add = r.number;
    return ok;
  }

  // Whether the reply is what the protocol says it must be (else a Problem).
  bool Check(Conn& c, const StoreRequest& req, const StoreReply& r) {
    bool ok = true;
    switch (req.op) {
      case StoreOp::kGet:
        ok = r.values.size() == 1 && r.values[0] == c.set.values[0];
        if (!ok) loop_.Problem("GET " + req.keys[0] + " returned another value than the SET before it");
        break;
      case StoreOp::kAdd: ok = CheckAdd(c, req, r); break;
      case StoreOp::kWait:
        ok = r.number == 0;
        if (!ok) loop_.Problem("WAIT on an existing key replied " + std::to_string(r.number) + ", not 0");
        break;
      case StoreOp::kCompareSet:
        ok = r.values.size() == 1 && r.values[0] == c.cas.values[1];
        if (!ok) loop_.Problem("COMPARE_SET " + req.keys[0] + " did not reply with the desired value");
        break;
      default: break;
    }
    return ok;
  }

  void OnReply(Conn& c, const StoreRequest& req, const StoreReply& r) {
    const Clock::time_point now = Clock::now();
    if (!Check(c, req, r)) {
      loop_.Close(c);
      return;
    }
    if (measuring_ && c.sent >= window_start_ && (window_end_ == Clock::time_point{} || now <= window_end_)) {
      lat_us_.push_back(std::chrono::duration<double, std::micro>(now - c.sent).count());
      requests_ += c.step == 0 ? 2 : 1;
    }
    c.step = (c.step + 1) % 4;
    if (c.step == 0) ++c.cycle;
    Next(c);
  }

  // Timed mode: opens the window after the warm-up, closes it after
  // --seconds; then every connection with no reply due is done.
  bool Finished() {
    if (loop_.errors() > 0) return true;
    if (timed_) {
      const Clock::time_point now = Clock::now();
      if (!measuring_ && Since(start_, now) >= o_.warmup) {
        measuring_ = true;
        window_start_ = now;
        cpu0_ = ServerCpu(o_.server_pid);
      } else if (measuring_ && !stopping_ && Since(window_start_, now) >= o_.seconds) {
        stopping_ = true;
        window_end_ = now;
      }
      if (stopping_) {
        for (Conn& c : conns_) {
          if (c.due.empty()) MarkDone(c);
        }
      }
    }
    return finished_ == o_.conns;
  }

  // The count: one more GET of the shared counter (every ADD replied).
  void CheckTotal() {
    Conn& c = conns_[0];
    c.get.keys = {total_key_};
    const std::string expect = std::to_string(adds_);
    bool got_it = false;
    loop_.Queue(c, c.get);
    loop_.Flush(c);
    loop_.Run([](Conn&) {},
              [&](Conn&, const StoreRequest&, const StoreReply& r) {
                got_it = true;
                if (r.values.size() != 1 || r.values[0] != expect) {
                  loop_.Problem("GET " + total_key_ + " returned '" +
                                std::string(r.values.empty() ? "" : r.values[0]) + "' after " + expect + " ADDs");
                }
              },
              [&]() { return got_it || loop_.errors() > 0; });
  }

  void Print(const Cpu& cpu) {
    const double secs = Since(window_start_, window_end_);
    const double p50 = Percentile(lat_us_, 0.50), p99 = Percentile(lat_us_, 0.99);
    std::printf("%s\n", Json({{"requests", static_cast<double>(requests_)},
                              {"seconds", secs},
                              {"requests_per_s", secs > 0 ? static_cast<double>(requests_) / secs : 0},
                              {"p50_us", p50},
                              {"p99_us", p99},
                              {"server_cpu_s", cpu.total},
                              {"server_sys_s", cpu.sys},
                              {"adds", static_cast<double>(adds_)},
                              {"conns", o_.conns},
                              {"value_bytes", static_cast<double>(o_.value_bytes)},
                              {"errors", loop_.errors()}})
                            .c_str());
  }

  const Options& o_;
  Loop loop_;
  std::vector<Conn> conns_;
  const std::string total_key_;
  int64_t adds_ = 0;
  std::vector<bool> seen_add_;  // ADD results, to catch a count handed out twice
  std::vector<double> lat_us_;
  long requests_ = 0;
  bool timed_ = false;
  Clock::time_point start_, window_start_{}, window_end_{};
  bool measuring_ = false, stopping_ = false;
  Cpu cpu0_;
  int finished_ = 0;
};

}  // namespace

int Mix(const Options& o) {
  RaiseFdLimit(static_cast<size_t>(o.conns) + 16);
  MixRun run(o);
  return run.Run();
}

}  // namespace store_load
