// The server side of the fault-tolerance calls' gRPC objects (ft_runs.h has
// their semantics): FtSyncCall, one held FtSync; FtWatchStream, one open
// FtWatch; FtOutbox, the gRPC work collected under the server's lock and
// done after it is released.
//
// Ownership: gRPC owns both reactors; each deletes itself in OnDone, which
// comes only after its Finish. The server keeps a pointer to each while
// it holds it (a map by id, under its lock) and removes it from there
// before it is finished: whoever removes it finishes it, exactly once.
//
// An FtWatchStream the server registered sends its initial metadata (with
// kFtWatchOpenKey) before any event: the client knows from it that the
// server holds the watch (FtClient's on_open).
//
// FtWatchStream queues events under the server's lock (Push, RequestFinish)
// and writes them with no lock held (Kick and gRPC's callbacks), as
// JoinStream does; a true Push or RequestFinish is a hold that keeps the
// stream alive until that caller's Kick(). Its queue is bounded
// (kMaxFtWatchQueue): a client that does not read loses the oldest events
// (each one only tells it to abort the step in flight; the newest says as
// much as all of them).
//
// Thread model: FtSyncCall is touched by one finisher; FtWatchStream is
// thread-safe (its own mutex guards its queue).
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/convert/ft_convert.h"
#include "rendezvous/machine/step_sync.h"

namespace ctrun::rdzv {

inline constexpr size_t kMaxFtWatchQueue = 16;

class FtSyncCall;
class FtWatchStream;

// What the reactors report to (the server). Must outlive every reactor.
class FtCallOwner {
 public:
  // The held call's client went away (gRPC thread, no lock held).
  virtual void FtSyncCancelled(FtSyncCall* call) = 0;
  // The stream ended and is deleted when this returns (gRPC thread, no lock
  // held).
  virtual void FtWatchDone(FtWatchStream* stream) = 0;

 protected:
  ~FtCallOwner() = default;
};

grpc::Status ToGrpcStatus(const Status& status);

class FtSyncCall final : public grpc::ServerUnaryReactor {
 public:
  // compact_sources: the request's (0: the whole quorum in the reply).
  FtSyncCall(FtCallOwner* owner, uint64_t id, std::string run_id, std::string group, v1::FtSyncReply* reply,
             uint32_t compact_sources = 0)
      : owner_(owner), id_(id), run_id_(std::move(run_id)), group_(std::move(group)), reply_(reply),
        compact_sources_(compact_sources) {}

  uint64_t id() const { return id_; }
  const std::string& run_id() const { return run_id_; }
  const std::string& group() const { return group_; }

  // Each finishes the call; call one of them once, with no lock held.
  void Answer(const SyncAnswer& answer);
  void End(const grpc::Status& status) { Finish(status); }

  void OnCancel() override { owner_->FtSyncCancelled(this); }
  void OnDone() override { delete this; }

 private:
  FtCallOwner* const owner_;
  const uint64_t id_;
  const std::string run_id_;
  const std::string group_;
  v1::FtSyncReply* const reply_;
  const uint32_t compact_sources_;
};

class FtWatchStream final : public grpc::ServerWriteReactor<v1::FtEvent> {
 public:
  FtWatchStream(FtCallOwner* owner, uint64_t id, std::string run_id, std::string group)
      : owner_(owner), id_(id), run_id_(std::move(run_id)), group_(std::move(group)) {}

  uint64_t id() const { return id_; }
  const std::string& run_id() const { return run_id_; }
  const std::string& group() const { return group_; }

  // Queues `event` (dropping the oldest queued one not being written when
  // kMaxFtWatchQueue are queued). False, and nothing queued, when the
  // stream is already ending; true means the caller holds the stream and
  // must call Kick() once, with no lock held.
  bool Push(v1::FtEvent event);
  // Ends the stream with `status` once the queue is written. Same contract.
  bool RequestFinish(grpc::Status status);
  // Ends a stream nobody else knows about.
  void FinishNow(grpc::Status status);
  // Sends the initial metadata (kFtWatchOpenKey), unless an event or the
  // end went first; call once after registering it, with no lock held.
  void Open();
  // Releases one hold and starts whatever is due; may end the stream.
  void Kick();

  void OnSendInitialMetadataDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  struct Action {
    enum Kind { kNone, kMetadata, kWrite, kFinish } kind = kNone;
    const v1::FtEvent* event = nullptr;
    grpc::Status status;
  };
  Action NextLocked();
  void Perform(const Action& action);

  FtCallOwner* const owner_;
  const uint64_t id_;
  const std::string run_id_;
  const std::string group_;

  std::mutex mu_;
  std::deque<v1::FtEvent> queue_;  // front is being written while writing_
  bool writing_ = false;  // a write or the initial metadata in flight
  bool opened_ = false;   // Open() was called (the metadata is due)
  bool metadata_sent_ = false;
  std::optional<grpc::Status> finish_;
  bool finished_ = false;
  int holds_ = 0;
};

// Work collected under the server's lock, done after it is released.
struct FtOutbox {
  std::vector<std::pair<FtSyncCall*, SyncAnswer>> answers;
  std::vector<std::pair<FtSyncCall*, grpc::Status>> ends;
  std::vector<FtWatchStream*> kicks;  // held by a true Push/RequestFinish
  std::vector<std::string> logs;      // info lines

  // Logs, then answers, ends and kicks; leaves the outbox empty. Call with
  // no lock held.
  void Flush();
};

}  // namespace ctrun::rdzv
