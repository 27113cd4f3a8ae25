// LogHub: the server side of the shared logs (proto/rendezvous.proto's
// ShipLogs and ReadLogs): the runs' rings (rendezvous/logs/log_runs.h), the
// agents' ShipLogs streams that fill them and the ReadLogs streams that read
// them. RendezvousServer::Impl owns one and hands it the calls it admitted
// (logs_calls.cc: token, version, known run).
//
// Bounds: each run's ring (kLogRingBytes, kLogRingLines; at most
// kMaxLogRuns runs with logs, kLogBytesTotal for all their rings); a batch
// over kMaxLogBatchBytes, a host label over kMaxLogHostBytes or a chunk
// whose text does not end in '\n' ends its stream (INVALID_ARGUMENT;
// nothing of that batch is kept); at most
// kMaxShipStreams ShipLogs and kMaxLogReaders ReadLogs streams at once
// (RESOURCE_EXHAUSTED); a ShipLogs stream that sends nothing for
// kShipIdleLimit is cancelled. A reader never holds more than one message
// (kLogMessageBytes of lines, or kLogChunkMessageBytes of chunks for one
// that asks for chunks): it reads from its cursor in the ring, so a slow
// reader only misses what the ring dropped, and is told how many
// (LogLines.dropped). A following reader's new lines wait for
// kReaderWakeLines or kReaderFlush (the sweeper thread sends them). The
// texts of dropped chunks, at most kMaxSpareTexts, are kept to take the
// streams' next batches (at most kMaxSpareBytesPerStream a stream).
//
// Thread model: thread-safe; one mutex (mu_) guards every stream's state and
// the rings, and gRPC calls (StartRead, StartWrite, Finish, TryCancel) are
// made with it released. Lock order: the server's mu_ before this one; the
// hub never calls the server with its lock held.
//
// Lifetime: gRPC owns the reactors; each deletes itself in OnDone, after
// its Finish. A ShipLogs stream's OnDone waits for the sweeper's hold (it
// cancels idle ones with no lock held). The hub must outlive the gRPC
// server (Shutdown first).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous.grpc.pb.h"
#include "rendezvous/logs/log_record.h"
#include "rendezvous/logs/log_runs.h"

namespace ctrun::rdzv {

// A run's ring: at 8,192 ranks writing 100 lines of ~100 bytes a second
// (819,200 lines/s) 64 MiB are ~0.7 s of lines, what a follower may fall
// behind (off the CPU, its stream's window closed) without missing any.
inline constexpr size_t kLogRingBytes = 64 << 20;
inline constexpr size_t kLogRingLines = 1 << 20;
inline constexpr size_t kMaxLogRuns = 64;
// The rings of all runs together (LogRuns: past it the largest drops its oldest).
inline constexpr size_t kLogBytesTotal = 256 << 20;
inline constexpr size_t kMaxShipStreams = 4096;
inline constexpr size_t kMaxLogReaders = 64;
inline constexpr size_t kLogMessageBytes = 512 * 1024;
// A reader of chunks (ReadLogsRequest.chunks) is charged as one of lines
// (LogRing::ReadSlices: a line's text and node plus 48 bytes), which is
// about a chunk's wire size (its text plus its fields once, under 56 bytes
// and its node): its message is at most about this plus one line, well under
// gRPC's default 4 MiB. ~6,400 lines of 100 bytes a message (a reader has
// one in flight at a time), filled with the hub's lock held: larger ones
// (3 MiB) held the lock longer and showed no more lines on the bench.
inline constexpr size_t kLogChunkMessageBytes = 1 << 20;
inline constexpr std::chrono::seconds kShipIdleLimit{120};
// Texts of dropped ring chunks kept for the ShipLogs streams' next batches
// (each at most kMaxSpareTextBytes), and the most of them one stream's
// message holds between batches.
inline constexpr size_t kMaxSpareTexts = 256;
inline constexpr size_t kMaxSpareBytesPerStream = 16 << 10;
// A following reader that wrote less than kReaderFlush ago is sent new
// lines once kReaderWakeLines are numbered past its cursor, else when
// kReaderFlush has passed (the sweeper sends them): at hundreds of
// thousands of lines a second a reader gets a few large messages, not one
// per shipped batch; a line after a quiet spell still goes at once.
inline constexpr uint64_t kReaderWakeLines = 2048;
inline constexpr std::chrono::milliseconds kReaderFlush{20};

class LogHub;

class ShipLogsStream final : public grpc::ServerReadReactor<v1::LogBatch> {
 public:
  // Checks a stream's first batch: OK to go on, else the status it ends with.
  using Admit = std::function<grpc::Status(const grpc::CallbackServerContext& context, const v1::LogBatch& first)>;

  ShipLogsStream(LogHub* hub, grpc::CallbackServerContext* context, v1::ShipLogsReply* reply, Admit admit)
      : hub_(hub), context_(context), reply_(reply), admit_(std::move(admit)) {}

  void OnReadDone(bool ok) override;
  void OnDone() override;

 private:
  friend class LogHub;
  LogHub* const hub_;
  grpc::CallbackServerContext* const context_;
  v1::ShipLogsReply* const reply_;
  const Admit admit_;
  v1::LogBatch batch_;
  // Guarded by the hub's mu_.
  std::string run_id_;  // "" until the first batch is admitted
  std::shared_ptr<const std::string> label_;  // shared by every chunk the stream stores
  uint64_t epoch_ = 0;
  uint64_t accepted_ = 0;
  std::chrono::steady_clock::time_point last_active_ = std::chrono::steady_clock::now();
  bool finished_ = false;
  int holds_ = 0;
};

class ReadLogsStream final : public grpc::ServerWriteReactor<v1::LogLines> {
 public:
  ReadLogsStream(LogHub* hub, std::string run_id, LogFilter filter, bool follow, bool chunks)
      : hub_(hub), run_id_(std::move(run_id)), filter_(std::move(filter)), follow_(follow), chunks_(chunks) {}

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  friend class LogHub;
  LogHub* const hub_;
  const std::string run_id_;
  const LogFilter filter_;
  const bool follow_;
  const bool chunks_;  // sends LogLines.chunks (ReadLogsRequest.chunks), not .lines
  // Guarded by the hub's mu_.
  uint64_t cursor_ = 1;
  uint64_t epoch_ = 0;
  std::chrono::steady_clock::time_point last_write_{};  // when its last message was started
  v1::LogLines message_;
  bool writing_ = false;
  std::optional<grpc::Status> finish_;  // to end with once no write is in flight
  bool finished_ = false;
};

class LogHub {
 public:
  // `run_known` tells whether the server still holds a run (asked about the
  // runs with logs about once a second, with no hub lock held): the logs
  // of a forgotten run are dropped and its followers' streams end.
  explicit LogHub(std::function<std::vector<bool>(const std::vector<std::string>&)> run_known);
  ~LogHub();  // Shutdown()
  LogHub(const LogHub&) = delete;
  LogHub& operator=(const LogHub&) = delete;

  // A new ShipLogs call: its reactor, or (too many streams, stopping) the
  // default reactor finished with RESOURCE_EXHAUSTED / UNAVAILABLE.
  grpc::ServerReadReactor<v1::LogBatch>* StartShip(grpc::CallbackServerContext* context, v1::ShipLogsReply* reply,
                                                   ShipLogsStream::Admit admit);
  // A ReadLogs call the server admitted, for run `run_id`: sends the lines
  // kept, then (follow) the new ones.
  grpc::ServerWriteReactor<v1::LogLines>* StartRead(grpc::CallbackServerContext* context,
                                                    const v1::ReadLogsRequest& request);

  // A call refused before it reached the hub (token, unknown run): finished
  // at once with `status`.
  static grpc::ServerWriteReactor<v1::LogLines>* Refuse(const grpc::Status& status);
  static grpc::ServerReadReactor<v1::LogBatch>* RefuseShip(const grpc::Status& status);

  // Ends every reader (OK: the log is complete as far as this server goes)
  // and stops the sweeper. Idempotent.
  void Shutdown();

 private:
  friend class ShipLogsStream;
  friend class ReadLogsStream;
  enum class Act { kNone, kWrite, kFinish };

  // Requires mu_. Fills reader `r`'s next message, or decides its end; a
  // following reader's few new lines wait (kReaderFlush, flush_at_).
  Act NextLocked(ReadLogsStream* r);
  // Requires mu_: whether following reader `r`'s new lines in `ring` wait
  // for more (then flush_at_ is at most when they go).
  bool DeferLocked(ReadLogsStream* r, const LogRing& ring, std::chrono::steady_clock::time_point now);
  // Requires mu_: the readers' deferred lines, due by now.
  void FlushLocked(std::vector<std::pair<ReadLogsStream*, Act>>& acts);
  void Perform(ReadLogsStream* r, Act act);
  // A batch of `s` (admitted or not yet). Returns the status to end the
  // stream with, or nullopt to read on; `wakes` gets the readers to write.
  std::optional<grpc::Status> TakeBatch(ShipLogsStream* s, std::vector<std::pair<ReadLogsStream*, Act>>& wakes);
  // Requires mu_: ends the readers of `run_id` (its ring is gone).
  void EndReadersLocked(const std::string& run_id, std::vector<std::pair<ReadLogsStream*, Act>>& acts);
  void Sweep();

  const std::function<std::vector<bool>(const std::vector<std::string>&)> run_known_;
  std::mutex mu_;
  std::condition_variable cv_;
  LogRuns runs_;                        // guarded by mu_
  std::set<ShipLogsStream*> ships_;     // guarded by mu_
  std::set<ReadLogsStream*> readers_;   // guarded by mu_
  std::vector<std::string> spare_texts_;  // guarded by mu_; dropped chunks' texts, for reuse
  bool stopping_ = false;               // guarded by mu_
  // When the sweeper sends deferred lines next (max: none wait); guarded by mu_.
  std::chrono::steady_clock::time_point flush_at_ = std::chrono::steady_clock::time_point::max();
  std::thread sweeper_;
};

}  // namespace ctrun::rdzv
