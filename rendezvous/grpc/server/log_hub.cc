#include "rendezvous/grpc/server/log_hub.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "rendezvous/grpc/convert/log_limits.h"

namespace ctrun::rdzv {
namespace {

// A node reports at most this many lines dropped per batch: more is a
// hostile or broken client (the numbers must not run out).
constexpr uint64_t kMaxDroppedPerBatch = uint64_t{1} << 32;

// A call refused before it started: finished at once, deleted when done.
template <class Reactor>
class Refused final : public Reactor {
 public:
  explicit Refused(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

// A ring entry of a shipped LogLine or LogChunk (the same fields), taking its text.
template <class Message>
LogRingChunk RingChunkOf(Message& m, const std::shared_ptr<const std::string>& node) {
  LogRingChunk c;
  c.rank = m.rank();
  c.local_rank = m.local_rank();
  c.is_stderr = m.is_stderr();
  c.unix_s = m.unix_s();
  c.node = node;
  c.text = std::move(*m.mutable_text());
  return c;
}

// Why the server refuses `batch` (its first on the stream when `first`), or
// nullopt: its bounds and its lines' form, checked with no lock held.
std::optional<grpc::Status> CheckLogBatch(const v1::LogBatch& batch, bool first) {
  if (first && (batch.host().size() > kMaxLogHostBytes || batch.run_id().empty())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        batch.run_id().empty() ? "log batch: the first batch must name the run (run_id)"
                                               : "log batch: host is " + std::to_string(batch.host().size()) +
                                                     " bytes, over the bound of " +
                                                     std::to_string(kMaxLogHostBytes));
  }
  if (batch.ByteSizeLong() > kMaxLogBatchBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "log batch of " + std::to_string(batch.ByteSizeLong()) + " bytes, over the bound of " +
                            std::to_string(kMaxLogBatchBytes) + ": send smaller batches");
  }
  if (batch.dropped() > kMaxDroppedPerBatch) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "log batch: dropped count out of bounds");
  }
  for (int i = 0; i < batch.chunks_size(); ++i) {
    const std::string& text = batch.chunks(i).text();
    if (!text.empty() && text.back() != '\n') {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "log batch: chunks[" + std::to_string(i) +
                              "].text does not end in a newline: send whole lines, each ending in '\\n'");
    }
  }
  return std::nullopt;
}

// Fills `m` (cleared) with the lines of `ring` from `cursor` that match
// `filter`, as LogRing::ReadSlices charges them (a line's text and node
// plus 48 bytes: about what its LogLine takes on the wire): at most
// kLogMessageBytes of them as one LogLine per line, or, when `chunks`,
// kLogChunkMessageBytes of them as one LogChunk per slice (a slice's text
// plus its fields once: less than its lines' charge). The message's line
// and chunk messages (and their strings) are kept by Clear for reuse: no
// allocation per line or chunk once the message has held as many.
LogCursor FillMessage(const LogRing& ring, uint64_t cursor, const LogFilter& filter, bool chunks, v1::LogLines& m) {
  static const std::string kNoNode;
  if (chunks) {
    return ring.ReadSlices(cursor, filter, kLogChunkMessageBytes, [&m](const LogSlice& s) {
      const LogRingChunk& c = *s.chunk;
      v1::LogChunk* out = m.add_chunks();
      out->set_rank(c.rank);
      out->set_local_rank(c.local_rank);
      out->set_is_stderr(c.is_stderr);
      out->set_unix_s(c.unix_s);
      out->set_text(s.text.data(), s.text.size());
      out->set_first_seq(s.first_seq);
      out->set_node(c.node ? *c.node : kNoNode);
    });
  }
  return ring.ReadSlices(cursor, filter, kLogMessageBytes, [&m](const LogSlice& s) {
    const LogRingChunk& c = *s.chunk;
    const std::string& node = c.node ? *c.node : kNoNode;
    uint64_t seq = s.first_seq;
    for (size_t pos = 0; pos < s.text.size();) {
      const size_t nl = s.text.find('\n', pos);
      v1::LogLine* l = m.add_lines();
      l->set_rank(c.rank);
      l->set_local_rank(c.local_rank);
      l->set_is_stderr(c.is_stderr);
      l->set_unix_s(c.unix_s);
      l->set_text(s.text.data() + pos, nl - pos);
      l->set_seq(seq++);
      l->set_node(node);
      pos = nl + 1;
    }
  });
}

}  // namespace

void ShipLogsStream::OnReadDone(bool ok) {
  if (!ok) {  // the client half-closed, went away, or the call was cancelled
    bool finish = false;
    {
      std::lock_guard<std::mutex> lock(hub_->mu_);
      finish = !std::exchange(finished_, true);
      reply_->set_accepted(accepted_);
    }
    if (finish) Finish(grpc::Status::OK);
    return;
  }
  std::vector<std::pair<ReadLogsStream*, LogHub::Act>> wakes;
  std::optional<grpc::Status> end = hub_->TakeBatch(this, wakes);
  for (auto& [reader, act] : wakes) hub_->Perform(reader, act);
  if (end) {
    Finish(*end);
    return;
  }
  StartRead(&batch_);
}

void ShipLogsStream::OnDone() {
  {
    std::unique_lock<std::mutex> lock(hub_->mu_);
    hub_->cv_.wait(lock, [this] { return holds_ == 0; });  // the sweeper's TryCancel is done with us
    hub_->ships_.erase(this);
  }
  delete this;
}

void ReadLogsStream::OnWriteDone(bool ok) {
  LogHub::Act act;
  {
    std::lock_guard<std::mutex> lock(hub_->mu_);
    writing_ = false;
    if (!ok && !finish_) finish_ = grpc::Status(grpc::StatusCode::CANCELLED, "the reader went away");
    act = hub_->NextLocked(this);
  }
  hub_->Perform(this, act);
}

void ReadLogsStream::OnCancel() {
  LogHub::Act act;
  {
    std::lock_guard<std::mutex> lock(hub_->mu_);
    if (!finish_) finish_ = grpc::Status(grpc::StatusCode::CANCELLED, "the reader went away");
    act = hub_->NextLocked(this);
  }
  hub_->Perform(this, act);
}

void ReadLogsStream::OnDone() {
  {
    std::lock_guard<std::mutex> lock(hub_->mu_);
    hub_->readers_.erase(this);
  }
  delete this;
}

LogHub::LogHub(std::function<std::vector<bool>(const std::vector<std::string>&)> run_known)
    : run_known_(std::move(run_known)),
      runs_(LogRunsLimits{LogRingLimits{kLogRingBytes, kLogRingLines}, kMaxLogRuns, kLogBytesTotal}) {
  sweeper_ = std::thread([this] { Sweep(); });
}

LogHub::~LogHub() { Shutdown(); }

grpc::ServerReadReactor<v1::LogBatch>* LogHub::StartShip(grpc::CallbackServerContext* context,
                                                         v1::ShipLogsReply* reply, ShipLogsStream::Admit admit) {
  ShipLogsStream* stream = nullptr;
  grpc::Status refusal;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      refusal = grpc::Status(grpc::StatusCode::UNAVAILABLE, "rendezvous server is shutting down");
    } else if (ships_.size() >= kMaxShipStreams) {
      refusal = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                             "rendezvous server holds " + std::to_string(kMaxShipStreams) +
                                 " log streams already: retry later");
    } else {
      stream = new ShipLogsStream(this, context, reply, std::move(admit));
      ships_.insert(stream);
    }
  }
  if (!stream) return new Refused<grpc::ServerReadReactor<v1::LogBatch>>(refusal);
  stream->StartRead(&stream->batch_);
  return stream;
}

grpc::ServerWriteReactor<v1::LogLines>* LogHub::StartRead(grpc::CallbackServerContext* /*context*/,
                                                          const v1::ReadLogsRequest& request) {
  ReadLogsStream* reader = nullptr;
  grpc::Status refusal;
  Act act = Act::kNone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      refusal = grpc::Status(grpc::StatusCode::UNAVAILABLE, "rendezvous server is shutting down");
    } else if (readers_.size() >= kMaxLogReaders) {
      refusal = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                             "rendezvous server serves " + std::to_string(kMaxLogReaders) +
                                 " log readers already: retry later");
    } else {
      LogFilter filter;
      if (request.has_rank()) filter.rank = request.rank();
      filter.node = request.node();
      filter.since_unix_s = request.since_unix_s();
      reader = new ReadLogsStream(this, request.run_id(), std::move(filter), request.follow(), request.chunks());
      reader->epoch_ = runs_.Epoch(request.run_id());
      readers_.insert(reader);
      act = NextLocked(reader);
    }
  }
  if (!reader) return Refuse(refusal);
  Perform(reader, act);
  return reader;
}

grpc::ServerWriteReactor<v1::LogLines>* LogHub::Refuse(const grpc::Status& status) {
  return new Refused<grpc::ServerWriteReactor<v1::LogLines>>(status);
}

grpc::ServerReadReactor<v1::LogBatch>* LogHub::RefuseShip(const grpc::Status& status) {
  return new Refused<grpc::ServerReadReactor<v1::LogBatch>>(status);
}

void LogHub::Shutdown() {
  std::vector<std::pair<ReadLogsStream*, Act>> acts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    for (ReadLogsStream* r : readers_) {
      if (!r->finish_) r->finish_ = grpc::Status::OK;
      if (Act act = NextLocked(r); act != Act::kNone) acts.emplace_back(r, act);
    }
    cv_.notify_all();
  }
  for (auto& [r, act] : acts) Perform(r, act);
  if (sweeper_.joinable()) sweeper_.join();
}

LogHub::Act LogHub::NextLocked(ReadLogsStream* r) {
  if (r->finished_ || r->writing_) return Act::kNone;
  if (r->finish_) {
    r->finished_ = true;
    return Act::kFinish;
  }
  if (LogRing* ring = runs_.Find(r->run_id_)) {
    if (const uint64_t epoch = runs_.Epoch(r->run_id_); epoch != r->epoch_) {  // a ring made anew
      r->epoch_ = epoch;
      r->cursor_ = 1;
    }
    const auto now = std::chrono::steady_clock::now();
    if (DeferLocked(r, *ring, now)) return Act::kNone;
    v1::LogLines& m = r->message_;
    m.Clear();
    const LogCursor read = FillMessage(*ring, r->cursor_, r->filter_, r->chunks_, m);
    r->cursor_ = read.next;
    if (m.lines_size() > 0 || m.chunks_size() > 0 || read.dropped > 0) {
      m.set_dropped(read.dropped);
      r->writing_ = true;
      r->last_write_ = now;
      return Act::kWrite;
    }
  }
  if (!r->follow_) {
    r->finish_ = grpc::Status::OK;
    r->finished_ = true;
    return Act::kFinish;
  }
  return Act::kNone;
}

bool LogHub::DeferLocked(ReadLogsStream* r, const LogRing& ring, std::chrono::steady_clock::time_point now) {
  if (!r->follow_ || ring.next_seq() <= r->cursor_) return false;  // nothing new: nothing waits
  if (ring.next_seq() - r->cursor_ >= kReaderWakeLines || now - r->last_write_ >= kReaderFlush) return false;
  const auto due = r->last_write_ + kReaderFlush;
  if (due < flush_at_) {
    flush_at_ = due;
    cv_.notify_all();  // the sweeper waits for an earlier time
  }
  return true;
}

void LogHub::FlushLocked(std::vector<std::pair<ReadLogsStream*, Act>>& acts) {
  flush_at_ = std::chrono::steady_clock::time_point::max();
  for (ReadLogsStream* r : readers_) {
    if (Act act = NextLocked(r); act != Act::kNone) acts.emplace_back(r, act);  // or deferred again
  }
}

void LogHub::Perform(ReadLogsStream* r, Act act) {
  if (act == Act::kWrite) r->StartWrite(&r->message_);
  if (act == Act::kFinish) r->Finish(*r->finish_);  // finish_ is fixed once finished_ is set
}

std::optional<grpc::Status> LogHub::TakeBatch(ShipLogsStream* s, std::vector<std::pair<ReadLogsStream*, Act>>& wakes) {
  v1::LogBatch& batch = s->batch_;
  std::optional<grpc::Status> refusal;
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    first = s->run_id_.empty();
  }
  // Checked with no hub lock held: the admission takes the server's lock.
  if (first) {
    grpc::Status admitted = s->admit_(*s->context_, batch);
    if (!admitted.ok()) refusal = admitted;
  }
  if (!refusal) refusal = CheckLogBatch(batch, first);
  std::lock_guard<std::mutex> lock(mu_);
  if (refusal) {
    s->finished_ = true;
    return refusal;
  }
  if (first) {
    s->run_id_ = batch.run_id();
    s->label_ = std::make_shared<const std::string>(
        batch.host().empty() ? batch.node().addr().substr(0, kMaxLogHostBytes) : batch.host());
    std::string evicted;
    runs_.Open(s->run_id_, &evicted);
    if (!evicted.empty()) EndReadersLocked(evicted, wakes);
    s->epoch_ = runs_.Epoch(s->run_id_);
  } else if (runs_.Epoch(s->run_id_) != s->epoch_) {
    s->finished_ = true;
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "rendezvous server dropped the logs of run '" + s->run_id_ +
                            "' (the run was forgotten, or more runs ship logs than it keeps)");
  }
  LogRing& ring = *runs_.Find(s->run_id_);
  ring.NoteDropped(batch.dropped());
  uint64_t accepted = 0;
  for (v1::LogLine& l : *batch.mutable_lines()) {  // single lines: one-line chunks
    LogRingChunk c = RingChunkOf(l, s->label_);
    c.text.push_back('\n');  // a '\n' inside makes it more lines: counted as such
    accepted += runs_.Append(ring, std::move(c));
  }
  size_t given = 0;  // spare capacity handed to this stream's message
  for (v1::LogChunk& c : *batch.mutable_chunks()) {
    accepted += runs_.Append(ring, RingChunkOf(c, s->label_), &spare_texts_, kMaxSpareTexts);
    // The stream's next batch is parsed into a dropped chunk's memory.
    if (!spare_texts_.empty() && given + spare_texts_.back().capacity() <= kMaxSpareBytesPerStream) {
      std::string& text = *c.mutable_text();
      text.swap(spare_texts_.back());
      text.clear();
      given += text.capacity();
      spare_texts_.pop_back();
    }
  }
  s->accepted_ += accepted;
  s->last_active_ = std::chrono::steady_clock::now();
  runs_.Touch(s->run_id_);
  for (ReadLogsStream* r : readers_) {
    if (r->run_id_ != s->run_id_) continue;
    if (Act act = NextLocked(r); act != Act::kNone) wakes.emplace_back(r, act);
  }
  return std::nullopt;
}

void LogHub::EndReadersLocked(const std::string& run_id, std::vector<std::pair<ReadLogsStream*, Act>>& acts) {
  for (ReadLogsStream* r : readers_) {
    if (r->run_id_ != run_id) continue;
    if (!r->finish_) r->finish_ = grpc::Status::OK;
    if (Act act = NextLocked(r); act != Act::kNone) acts.emplace_back(r, act);
  }
}

void LogHub::Sweep() {
  std::unique_lock<std::mutex> lock(mu_);
  auto next_sweep = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (!stopping_) {
    const auto until = std::min(next_sweep, flush_at_);
    cv_.wait_until(lock, until, [&] { return stopping_ || flush_at_ < until; });
    if (stopping_) break;
    auto now = std::chrono::steady_clock::now();
    if (now >= flush_at_) {
      std::vector<std::pair<ReadLogsStream*, Act>> flushed;
      FlushLocked(flushed);
      lock.unlock();
      for (auto& [r, act] : flushed) Perform(r, act);
      lock.lock();
      if (stopping_) break;
      now = std::chrono::steady_clock::now();
    }
    if (now < next_sweep) continue;
    next_sweep = now + std::chrono::seconds(1);
    std::vector<ShipLogsStream*> idle;
    for (ShipLogsStream* s : ships_) {
      if (!s->finished_ && now - s->last_active_ > kShipIdleLimit) {
        ++s->holds_;
        s->last_active_ = now;  // cancelled once
        idle.push_back(s);
      }
    }
    const std::vector<std::string> ids = runs_.RunIds();
    lock.unlock();
    for (ShipLogsStream* s : idle) s->context_->TryCancel();
    const std::vector<bool> known = ids.empty() ? std::vector<bool>() : run_known_(ids);
    lock.lock();
    for (ShipLogsStream* s : idle) --s->holds_;
    if (!idle.empty()) cv_.notify_all();
    std::vector<std::pair<ReadLogsStream*, Act>> acts;
    for (size_t i = 0; i < ids.size() && i < known.size(); ++i) {
      if (!known[i] && runs_.Forget(ids[i])) EndReadersLocked(ids[i], acts);
    }
    if (acts.empty()) continue;
    lock.unlock();
    for (auto& [r, act] : acts) Perform(r, act);
    lock.lock();
  }
}

}  // namespace ctrun::rdzv
