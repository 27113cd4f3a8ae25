#include "rendezvous/grpc/server.h"

#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/grpc_process.h"
#include "rendezvous/persist/machine_snapshot.h"
#include "rendezvous/metrics/metrics.h"
#include "rendezvous/grpc/proto_convert.h"
#include "rendezvous/grpc/reconnect.h"
#include "rendezvous/machine/run_view.h"
#include "rendezvous/persist/state_store.h"

namespace ctrun::rdzv {
namespace {

constexpr char kTokenMismatch[] =
    "rendezvous token mismatch: this node's token is not the server's (give every node and the server the same "
    "CTRUN_RDZV_TOKEN, or --rdzv-conf token_file / ctrund --token-file)";
constexpr char kShuttingDown[] = "rendezvous server is shutting down: retry against the new server";

struct HostPort {
  std::string host;  // as written, brackets included for IPv6
  int port = 0;
};

Result<HostPort> ParseListenAddress(const std::string& address) {
  const Status bad = Status::InvalidArgument("listen address '" + address +
                                             "': expected HOST:PORT with PORT in 0..65535, e.g. 0.0.0.0:29400");
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return bad;
  std::string host = address.substr(0, colon);
  if (host.find(':') != std::string::npos && !(host.front() == '[' && host.back() == ']')) return bad;
  int port = 0;
  for (size_t i = colon + 1; i < address.size(); ++i) {
    char c = address[i];
    if (c < '0' || c > '9' || port > 65535) return bad;
    port = port * 10 + (c - '0');
  }
  if (port > 65535) return bad;
  return HostPort{host, port};
}

// gRPC only says that binding failed; a plain bind() of the same address
// tells why.
std::string BindFailureReason(const HostPort& hp) {
  std::string host = hp.host;
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string port = std::to_string(hp.port);
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) return ::gai_strerror(rc);
  std::string reason = "the address is not available";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc = ::bind(fd, ai->ai_addr, ai->ai_addrlen);
    int err = errno;
    ::close(fd);
    if (rc != 0) {
      reason = err == EADDRINUSE ? "address in use" : std::strerror(err);
      break;
    }
  }
  ::freeaddrinfo(found);
  return reason;
}

// Compares in time independent of where the strings differ.
bool TokenMatches(const std::string& want, const std::string& got) {
  unsigned char diff = want.size() == got.size() ? 0 : 1;
  for (size_t i = 0; i < got.size(); ++i) diff |= static_cast<unsigned char>(got[i] ^ want[i % want.size()]);
  return diff == 0;
}

// `s` cut to 64 bytes with anything but printable ASCII escaped: it came
// from a caller who is not trusted.
std::string Printable(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 64; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
    }
  }
  if (s.size() > 64) out += "...";
  return out;
}

// Logs refused calls at warn, at most one line per second: a stranger
// hammering the port must not flood the log. Thread-safe.
class RefusalLog {
 public:
  void Note(const std::string& peer, const std::string& run_id, const char* what) {
    const auto now = std::chrono::steady_clock::now();
    uint64_t suppressed = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (now < next_) {
        ++suppressed_;
        return;
      }
      next_ = now + std::chrono::seconds(1);
      suppressed = std::exchange(suppressed_, 0);
    }
    spdlog::warn("refused a call from {} for run '{}': it sent {} (the caller must use this server's "
                 "token: CTRUN_RDZV_TOKEN or --rdzv-conf token_file){}",
                 Printable(peer), Printable(run_id), what,
                 suppressed ? " (" + std::to_string(suppressed) + " more refusals not logged)" : "");
  }

 private:
  std::mutex mu_;
  std::chrono::steady_clock::time_point next_{};
  uint64_t suppressed_ = 0;
};

class JoinStream;

// What a JoinStream reports its end to.
class StreamOwner {
 public:
  virtual void StreamDone(JoinStream* stream) = 0;

 protected:
  ~StreamOwner() = default;
};

// One Join call. Updates are queued under the owner's lock and written one
// at a time with no lock held. Lifetime: gRPC calls OnDone only after
// Finish, and Finish waits until no holder is left (holds_ == 0), so a
// pointer that was held under the owner's lock stays valid until its Kick().
// OnDone unregisters the stream and deletes it.
class JoinStream final : public grpc::ServerWriteReactor<v1::Update> {
 public:
  JoinStream(StreamOwner* owner, std::string run_id, NodeId node, uint64_t incarnation)
      : owner_(owner), run_id_(std::move(run_id)), node_(std::move(node)), incarnation_(incarnation) {}

  const std::string& run_id() const { return run_id_; }
  const NodeId& node() const { return node_; }
  uint64_t incarnation() const { return incarnation_; }
  // The client cancelled the call or its connection broke (its agent died,
  // or its host is gone) rather than the server ending the stream.
  bool client_gone() const {
    std::lock_guard<std::mutex> lock(mu_);
    return client_gone_;
  }

  // Queues `update` (then ends the stream OK when `finish_after`). False,
  // and nothing queued, when the stream is already ending; true means the
  // caller holds the stream and must call Kick() once, with no lock held.
  bool Enqueue(v1::Update update, bool finish_after) {
    std::lock_guard<std::mutex> lock(mu_);
    if (finish_) return false;
    queue_.push_back(std::move(update));
    if (finish_after) finish_ = grpc::Status::OK;
    ++holds_;
    return true;
  }

  // Ends the stream with `status` once the queue is written. Same contract
  // as Enqueue.
  bool RequestFinish(grpc::Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    if (finish_) return false;
    finish_ = std::move(status);
    ++holds_;
    return true;
  }

  // Ends a stream nobody else knows about yet.
  void FinishNow(grpc::Status status) {
    if (RequestFinish(std::move(status))) Kick();
  }

  // Releases one hold and starts whatever is due. May end the stream: the
  // caller must not touch it afterwards.
  void Kick() {
    Action action;
    {
      std::lock_guard<std::mutex> lock(mu_);
      --holds_;
      action = NextLocked();
    }
    Perform(action);
  }

  void OnWriteDone(bool ok) override {
    Action action;
    std::optional<uint64_t> round_sent;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (ok && queue_.front().has_round_complete()) round_sent = queue_.front().round_complete().round();
      queue_.pop_front();
      writing_ = false;
      if (!ok) {
        queue_.clear();
        client_gone_ = !finish_;
        if (!finish_) finish_ = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
      }
      action = NextLocked();
    }
    if (round_sent && spdlog::should_log(spdlog::level::debug)) {
      // Timestamped: bench/rendezvous.py takes the last one as "round complete".
      spdlog::debug("rendezvous run '{}': round {} sent to {}", run_id_, *round_sent, ToString(node_));
    }
    Perform(action);
  }

  void OnCancel() override {
    Action action;
    {
      std::lock_guard<std::mutex> lock(mu_);
      client_gone_ = !finish_;
      if (!finish_) finish_ = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
      action = NextLocked();
    }
    Perform(action);
  }

  void OnDone() override {
    owner_->StreamDone(this);
    delete this;
  }

 private:
  struct Action {
    enum Kind { kNone, kWrite, kFinish } kind = kNone;
    const v1::Update* update = nullptr;
    grpc::Status status;
  };

  Action NextLocked() {
    if (finished_ || writing_) return {};
    if (!queue_.empty()) {
      writing_ = true;
      return {Action::kWrite, &queue_.front(), {}};
    }
    if (finish_ && holds_ == 0) {
      finished_ = true;
      return {Action::kFinish, nullptr, *finish_};
    }
    return {};
  }

  void Perform(const Action& action) {
    if (action.kind == Action::kWrite) StartWrite(action.update);
    if (action.kind == Action::kFinish) Finish(action.status);
  }

  StreamOwner* const owner_;
  const std::string run_id_;
  const NodeId node_;
  const uint64_t incarnation_;

  mutable std::mutex mu_;
  bool client_gone_ = false;
  std::deque<v1::Update> queue_;  // front is being written while writing_; deque keeps it in place
  bool writing_ = false;
  std::optional<grpc::Status> finish_;  // wanted after the queue drains
  bool finished_ = false;               // Finish called: OnDone may come at any time
  int holds_ = 0;
};

// Work collected under the lock, done after it is released.
struct Outbox {
  std::vector<JoinStream*> kicks;
  std::vector<std::string> logs;
  std::vector<std::function<void()>> calls;  // WhenDrained callbacks now due

  void Flush() {
    for (JoinStream* s : kicks) s->Kick();
    kicks.clear();
    for (const std::string& line : logs) spdlog::info("{}", line);
    logs.clear();
    for (auto& call : calls) call();
    calls.clear();
  }
};

bool AnswersJoin(const Decision& d, const NodeId& joiner) {
  if (const auto* a = std::get_if<Admitted>(&d)) return a->node == joiner;
  if (const auto* r = std::get_if<Rejected>(&d)) return r->node == joiner;
  return false;
}

}  // namespace

class RendezvousServer::Impl final : public v1::Rendezvous::CallbackService, public StreamOwner {
 public:
  explicit Impl(const ServerOptions& options)
      : registry_(options.mode), token_(options.token), tls_(options.tls) {}

  ~Impl() override { Shutdown(); }

  Status AddRuns(const std::vector<FixedRun>& runs) {
    for (const FixedRun& run : runs) CTRUN_RETURN_IF_ERROR(registry_.Add(run.run_id, run.params));
    return Status::Ok();
  }

  // Resumes the runs kept in `dir` (ctrund --state-dir) and keeps writing there.
  Status RestoreRuns(const std::string& dir) {
    Result<StateStore> store = StateStore::Open(dir);
    if (!store.ok()) return store.status();
    const ClockPair now{Clock::now(), std::chrono::system_clock::now()};
    Result<std::vector<StoredRun>> runs = store->LoadAll(now);
    if (!runs.ok()) return runs.status();
    for (StoredRun& run : *runs) {
      ForgiveOutage(run.state, now.steady);
      Result<RendezvousMachine> machine = RendezvousMachine::Import(run.state);
      if (!machine.ok()) {
        return Status::InvalidArgument("state file " + store->PathOf(run.run_id) + ": " +
                                       machine.status().message() + " (move it out of --state-dir)");
      }
      CTRUN_RETURN_IF_ERROR(registry_.Add(run.run_id, run.state.params));
      **registry_.Find(run.run_id) = std::move(*machine);
      const Counts c = (*registry_.Find(run.run_id))->Tally();
      spdlog::info("rendezvous run '{}': resumed from {}: round {} {}, {} nodes", run.run_id,
                   store->PathOf(run.run_id), c.round,
                   c.closed ? "closed" : (c.complete ? "running" : "forming"), c.live_nodes);
    }
    store_ = std::move(*store);
    return Status::Ok();
  }

  Status Listen(const HostPort& hp) {
    std::string address = hp.host + ":" + std::to_string(hp.port);
    grpc::ServerBuilder builder;
    // Without this, Linux lets a second server bind the same port and steal
    // half the connections; the agent relies on bind failing to become a client.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddListeningPort(address, ServerCredentialsFor(tls_), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0) {
      server_.reset();
      const std::string reason = BindFailureReason(hp);
      return Status::Unavailable("cannot listen on " + address + ": " + reason +
                                 (reason == "address in use"
                                      ? " (stop whatever holds it, or pick another port)"
                                      : " (give an address of this host, e.g. 127.0.0.1:PORT or 0.0.0.0:PORT)"));
    }
    address_ = hp.host + ":" + std::to_string(port_);
    timer_ = std::thread([this] { TimerLoop(); });
    return Status::Ok();
  }

  void Shutdown() {
    Outbox out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
      for (auto& [run, nodes] : streams_) {
        for (auto& [node, stream] : nodes) {
          if (stream->RequestFinish(grpc::Status::OK)) out.kicks.push_back(stream);
        }
      }
      timer_cv_.notify_all();
    }
    out.Flush();
    if (timer_.joinable()) timer_.join();
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
      server_->Wait();
    }
  }

  void WhenDrained(const std::string& run_id, std::function<void()> cb) {
    Outbox out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      drained_waiters_[run_id].push_back(std::move(cb));
      CollectDrained(run_id, out);
    }
    out.Flush();
  }

  int port() const { return port_; }
  const std::string& address() const { return address_; }

  std::string MetricsText() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Metrics::RunNow> runs;
    for (const std::string& run_id : registry_.RunIds()) {
      const RendezvousMachine& machine = **registry_.Find(run_id);
      Metrics::RunNow r{run_id, machine.Tally(), 0};
      if (r.counts.complete) {
        for (const Member& m : machine.State().members) r.world_size += m.local_world_size;
      }
      runs.push_back(std::move(r));
    }
    return metrics_.Render(runs);
  }

  // A node's current stream that its client dropped means the node is gone
  // (agent killed, host lost): the machine hears it as a leave that does not
  // close the run, so the others restart now instead of after the keep-alive
  // timeout. A node that is in fact alive learns of it from its next
  // keep-alive (UNKNOWN_NODE) and joins again. Streams the server ended, or
  // that a newer Join replaced, say nothing.
  void StreamDone(JoinStream* stream) override {
    Outbox out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto run = streams_.find(stream->run_id());
      if (run == streams_.end()) return;
      auto it = run->second.find(stream->node());
      if (it == run->second.end() || it->second != stream) return;
      run->second.erase(it);
      if (run->second.empty()) streams_.erase(run);
      if (stream->client_gone() && !stopping_) {
        Result<RendezvousMachine*> machine = registry_.Find(stream->run_id());
        if (machine.ok() && (*machine)->StatusOf(stream->node())) {
          rdzv::Leave leave{stream->node(), stream->incarnation(), LeaveReason::kSignal};
          out.logs.push_back("rendezvous run '" + stream->run_id() + "': node " + ToString(leave.node) +
                             " dropped its connection; taken as gone");
          std::vector<Decision> decisions = (*machine)->Step(leave, Clock::now());
          Persist(stream->run_id(), **machine, true);
          Route(stream->run_id(), decisions, nullptr, nullptr, out);
          Rearm(**machine);
        }
      }
    }
    out.Flush();
  }

  grpc::ServerWriteReactor<v1::Update>* Join(grpc::CallbackServerContext* context,
                                             const v1::JoinRequest* request) override {
    auto* stream =
        new JoinStream(this, request->run_id(), NodeFromProto(request->node()), request->incarnation());
    if (grpc::Status bad = CheckCall(context, request->version(), request->token(), request->run_id()); !bad.ok()) {
      stream->FinishNow(bad);
      return stream;
    }
    rdzv::Join join = JoinFromProto(*request, PeerIp(context->peer()));
    Params params = ParamsFromProto(request->params());
    Outbox out;
    bool stopping = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping = stopping_;
      const bool resumed = !stopping && Resume(request->run_id(), join, ReconnectOf(*context), stream, out);
      if (!stopping && !resumed) {
        Result<RendezvousMachine*> machine = registry_.FindForJoin(request->run_id(), params);
        if (!machine.ok()) {
          v1::Update update;
          RejectedFromRegistryError(machine.status(), update.mutable_rejected());
          if (stream->Enqueue(std::move(update), true)) out.kicks.push_back(stream);
          out.logs.push_back("rendezvous run '" + request->run_id() + "': refused node " + ToString(join.node) +
                             ": " + machine.status().message());
        } else {
          spdlog::debug("rendezvous run '{}': join from {} (addr {})", request->run_id(), ToString(join.node),
                        join.addr);
          const TimePoint now = Clock::now();
          metrics_.OnJoin(request->run_id(), join.node, now);
          std::vector<Decision> decisions = (*machine)->Step(join, now);
          Persist(request->run_id(), **machine, true);
          if (!Route(request->run_id(), decisions, &join.node, stream, out)) Install(stream, out);
          Rearm(**machine);
        }
      }
    }
    if (stopping) {
      stream->FinishNow(grpc::Status(grpc::StatusCode::UNAVAILABLE, kShuttingDown));
    } else {
      out.Flush();
    }
    return stream;
  }

  grpc::ServerUnaryReactor* KeepAlive(grpc::CallbackServerContext* context, const v1::KeepAliveRequest* request,
                                      v1::KeepAliveReply* reply) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    grpc::Status status = CheckCall(context, request->version(), request->token(), request->run_id());
    Outbox out;
    if (status.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      Result<RendezvousMachine*> machine = Usable(request->run_id(), status);
      if (machine.ok()) {
        NodeId node = NodeFromProto(request->node());
        std::vector<Decision> decisions =
            (*machine)->Step(rdzv::KeepAlive{node, request->incarnation()}, Clock::now());
        Persist(request->run_id(), **machine, !decisions.empty());
        std::vector<Decision> others;
        for (Decision& d : decisions) {
          const auto* r = std::get_if<Rejected>(&d);
          if (r && r->node == node) {
            reply->mutable_rejected()->set_code(RejectCodeToProto(r->code));
            reply->mutable_rejected()->set_message(r->message);
          } else {
            others.push_back(std::move(d));
          }
        }
        Route(request->run_id(), others, nullptr, nullptr, out);
        Rearm(**machine);
      } else if (machine.status().IsNotFound()) {
        RejectedFromRegistryError(machine.status(), reply->mutable_rejected());
        status = grpc::Status::OK;
      }
    }
    out.Flush();
    reactor->Finish(status);
    return reactor;
  }

  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext* context, const v1::LeaveRequest* request,
                                  v1::LeaveReply* /*reply*/) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    grpc::Status status = CheckCall(context, request->version(), request->token(), request->run_id());
    Result<LeaveReason> reason = LeaveReasonFromProto(request->reason());
    if (status.ok() && !reason.ok()) status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, reason.status().message());
    Outbox out;
    if (status.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      Result<RendezvousMachine*> machine = Usable(request->run_id(), status);
      if (machine.ok()) {
        rdzv::Leave leave{NodeFromProto(request->node()), request->incarnation(), *reason};
        out.logs.push_back("rendezvous run '" + request->run_id() + "': node " + ToString(leave.node) +
                           " left (" + std::string(Name(leave.reason)) + ")");
        std::vector<Decision> decisions = (*machine)->Step(leave, Clock::now());
        Persist(request->run_id(), **machine, true);
        Route(request->run_id(), decisions, nullptr, nullptr, out);
        Rearm(**machine);
      }
    }
    out.Flush();
    reactor->Finish(status);
    return reactor;
  }

  grpc::ServerUnaryReactor* GetState(grpc::CallbackServerContext* context, const v1::StateRequest* request,
                                     v1::StateReply* reply) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    grpc::Status status = CheckCall(context, request->version(), request->token(), request->run_id());
    if (status.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      Result<RendezvousMachine*> machine = Usable(request->run_id(), status);
      const TimePoint now = Clock::now();
      if (machine.ok() && request->counts_only()) {
        StateReplyFromCounts((*machine)->Tally(), now, reply);
      } else if (machine.ok()) {
        StateReplyFromSnapshot((*machine)->State(), now, reply);
        StateReplyAddView(ViewOf((*machine)->Export(), (*machine)->Tally(), now), reply);
      }
    }
    reactor->Finish(status);
    return reactor;
  }

 private:
  grpc::Status CheckCall(grpc::CallbackServerContext* context, v1::ProtocolVersion version,
                         const std::string& token, const std::string& run_id) {
    if (!token_.empty() && !TokenMatches(token_, token)) {
      refusals_.Note(context->peer(), run_id, token.empty() ? "no token" : "a wrong token");
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, kTokenMismatch);
    }
    if (version != v1::PROTOCOL_VERSION_2) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "rendezvous protocol version " + std::to_string(static_cast<int>(version)) +
                              ", this server speaks 2: use the same ctrun version on every node");
    }
    return grpc::Status::OK;
  }

  // The machine for a unary call, or the error in `status` (UNAVAILABLE
  // while stopping, NOT_FOUND for an unknown run). Requires mu_.
  Result<RendezvousMachine*> Usable(const std::string& run_id, grpc::Status& status) {
    if (stopping_) {
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE, kShuttingDown);
      return Status::Unavailable(kShuttingDown);
    }
    Result<RendezvousMachine*> machine = registry_.Find(run_id);
    if (!machine.ok()) status = grpc::Status(grpc::StatusCode::NOT_FOUND, machine.status().message());
    return machine;
  }

  // Queues each decision on its addressees' streams. In a Join step
  // (`joiner` set), the joiner's answer and everything after it for that
  // node go to `joiner_stream`; earlier ones (deadlines applied before the
  // Join) go to its old stream. Returns whether the joiner was rejected.
  // Requires mu_.
  bool Route(const std::string& run_id, const std::vector<Decision>& decisions, const NodeId* joiner,
             JoinStream* joiner_stream, Outbox& out) {
    bool answered = false, rejected = false;
    metrics_.OnDecisions(run_id, decisions, Clock::now());
    for (const Decision& d : decisions) {
      if (joiner && !answered && AnswersJoin(d, *joiner)) {
        answered = true;
        rejected = std::holds_alternative<Rejected>(d);
      }
      v1::Update update;
      if (!std::holds_alternative<RoundComplete>(d)) UpdateFromDecision(d, &update);
      auto send = [&](const NodeId& node, bool finish_after, v1::Update message) {
        JoinStream* stream = (joiner && answered && node == *joiner) ? joiner_stream : Find(run_id, node);
        if (stream && stream->Enqueue(std::move(message), finish_after)) out.kicks.push_back(stream);
      };
      std::visit(
          [&](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, RoundComplete>) {
              RoundCompleteForPush(x, update.mutable_round_complete());
              for (size_t i = 0; i < x.members.size(); ++i) {
                v1::Update mine = update;
                if (i > 0) AddWholeMember(x, i, mine.mutable_round_complete());
                send(x.members[i].node, false, std::move(mine));
              }
            } else if constexpr (std::is_same_v<T, RestartRequested> || std::is_same_v<T, Closed>) {
              for (const NodeId& n : x.nodes) send(n, std::is_same_v<T, Closed>, update);
            } else if constexpr (std::is_same_v<T, Admitted>) {
              send(x.node, false, update);
            } else {
              send(x.node, true, update);  // Rejected, TimedOut, Evicted end the stream
            }
          },
          d);
      if (!std::holds_alternative<Admitted>(d) && !std::holds_alternative<Rejected>(d)) {
        out.logs.push_back("rendezvous run '" + run_id + "': " + Describe(d));
      }
    }
    CollectDrained(run_id, out);
    return rejected;
  }

  // Moves the WhenDrained callbacks of `run_id` into `out` once the run holds
  // no live node. Requires mu_.
  void CollectDrained(const std::string& run_id, Outbox& out) {
    auto waiting = drained_waiters_.find(run_id);
    if (waiting == drained_waiters_.end()) return;
    Result<RendezvousMachine*> machine = registry_.Find(run_id);
    if (machine.ok() && (*machine)->State().live_nodes > 0) return;
    for (auto& cb : waiting->second) out.calls.push_back(std::move(cb));
    drained_waiters_.erase(waiting);
  }


  // Writes the run's state to --state-dir, when there is one and `changed`
  // (a step that only refreshed keep-alive times is not written: a restart
  // refreshes them all anyway, see ForgiveOutage). A failed write is logged
  // and serving goes on. Requires mu_.
  void Persist(const std::string& run_id, const RendezvousMachine& machine, bool changed) {
    if (!store_ || !changed) return;
    Status s = store_->Save(StoredRun{run_id, machine.Export()},
                            ClockPair{Clock::now(), std::chrono::system_clock::now()});
    if (!s.ok()) spdlog::error("rendezvous run '{}': {}; a restarted ctrund would resume an older state", run_id,
                               s.message());
  }

  static Reconnect ReconnectOf(const grpc::CallbackServerContext& context) {
    auto it = context.client_metadata().find(kReconnectKey);
    if (it == context.client_metadata().end()) return Reconnect::kNo;
    return ParseReconnect(std::string_view(it->second.data(), it->second.size()));
  }

  // A Join that re-opens a broken stream (reconnect.h). Answers it and
  // returns true when the node is a member of the running round (the rank
  // table again, stepped as a keep-alive) or, for kRunning, when it is not
  // (RestartRequested); false when the Join is to be stepped as usual.
  // Requires mu_.
  bool Resume(const std::string& run_id, const rdzv::Join& join, Reconnect mode, JoinStream* stream, Outbox& out) {
    if (mode == Reconnect::kNo) return false;
    Result<RendezvousMachine*> found = registry_.Find(run_id);
    RendezvousMachine* machine = found.ok() ? *found : nullptr;
    v1::Update update;
    if (machine && machine->StatusOf(join.node) == NodeStatus::kMember) {
      std::vector<Decision> decisions = machine->Step(rdzv::KeepAlive{join.node, join.incarnation}, Clock::now());
      Persist(run_id, *machine, !decisions.empty());
      for (const Decision& d : decisions) {
        const auto* r = std::get_if<Rejected>(&d);
        if (r && r->node == join.node) {
          UpdateFromDecision(d, &update);
          if (stream->Enqueue(std::move(update), true)) out.kicks.push_back(stream);
          return true;
        }
      }
      Route(run_id, decisions, nullptr, nullptr, out);
      Rearm(*machine);
      if (machine->StatusOf(join.node) == NodeStatus::kMember) {
        Snapshot state = machine->State();
        RoundComplete again{state.round, state.members, 0, false, ""};
        for (const Member& m : state.members) again.world_size += m.local_world_size;
        UpdateFromDecision(again, &update);
        out.logs.push_back("rendezvous run '" + run_id + "': node " + ToString(join.node) +
                           " reconnected to running round " + std::to_string(state.round));
        if (stream->Enqueue(std::move(update), false)) out.kicks.push_back(stream);
        Install(stream, out);
        return true;
      }
    }
    if (mode != Reconnect::kRunning) return false;
    std::optional<NodeStatus> status = machine ? machine->StatusOf(join.node) : std::nullopt;
    if (status == NodeStatus::kParticipant || status == NodeStatus::kRedundant) {
      // The node has joined again since (its agent restarted the workers while
      // this reconnect waited for the server): this Join is stale.
      if (stream->RequestFinish(grpc::Status::OK)) out.kicks.push_back(stream);
      return true;
    }
    const uint64_t round = machine ? machine->Tally().round : 0;
    if (machine && machine->Tally().closed) {
      UpdateFromDecision(Closed{round, {join.node}}, &update);
      if (stream->Enqueue(std::move(update), true)) out.kicks.push_back(stream);
      return true;
    }
    UpdateFromDecision(RestartRequested{round, RestartReason::kNodeLeft, join.node, {join.node}}, &update);
    out.logs.push_back("rendezvous run '" + run_id + "': node " + ToString(join.node) +
                       " reconnected, but is no longer a member of a running round: asked to restart");
    if (stream->Enqueue(std::move(update), false)) out.kicks.push_back(stream);
    Install(stream, out);
    return true;
  }

  JoinStream* Find(const std::string& run_id, const NodeId& node) const {
    auto run = streams_.find(run_id);
    if (run == streams_.end()) return nullptr;
    auto it = run->second.find(node);
    return it == run->second.end() ? nullptr : it->second;
  }

  // Makes `stream` its node's stream, ending the one it replaces. Requires mu_.
  void Install(JoinStream* stream, Outbox& out) {
    JoinStream*& slot = streams_[stream->run_id()][stream->node()];
    if (slot && slot != stream && slot->RequestFinish(grpc::Status::OK)) out.kicks.push_back(slot);
    slot = stream;
  }

  // Wakes the timer if `machine` now has a deadline before the one it
  // sleeps until. Requires mu_.
  void Rearm(const RendezvousMachine& machine) {
    std::optional<TimePoint> next = machine.NextDeadline();
    if (next && (!timer_target_ || *next < *timer_target_)) {
      timer_dirty_ = true;
      timer_cv_.notify_one();
    }
  }

  void TimerLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      timer_dirty_ = false;
      timer_target_.reset();
      std::vector<std::string> due;
      TimePoint now = Clock::now();
      for (const std::string& run_id : registry_.RunIds()) {
        std::optional<TimePoint> next = (*registry_.Find(run_id))->NextDeadline();
        if (!next) continue;
        if (*next <= now) due.push_back(run_id);
        else if (!timer_target_ || *next < *timer_target_) timer_target_ = next;
      }
      if (!due.empty()) {
        Outbox out;
        for (const std::string& run_id : due) {
          RendezvousMachine& machine = **registry_.Find(run_id);
          std::vector<Decision> decisions = machine.Step(Tick{}, now);
          Persist(run_id, machine, !decisions.empty());
          Route(run_id, decisions, nullptr, nullptr, out);
        }
        lock.unlock();
        out.Flush();
        lock.lock();
        continue;
      }
      auto woken = [this] { return stopping_ || timer_dirty_; };
      if (timer_target_) {
        timer_cv_.wait_until(lock, *timer_target_, woken);
      } else {
        timer_cv_.wait(lock, woken);
      }
    }
  }

  std::mutex mu_;
  std::condition_variable timer_cv_;
  bool stopping_ = false;
  bool timer_dirty_ = false;
  std::optional<TimePoint> timer_target_;
  RunRegistry registry_;
  Metrics metrics_;
  std::map<std::string, std::map<NodeId, JoinStream*, NodeIdLess>> streams_;
  std::map<std::string, std::vector<std::function<void()>>> drained_waiters_;

  std::optional<StateStore> store_;  // set with --state-dir
  const std::string token_;
  const TlsConfig tls_;
  RefusalLog refusals_;
  int port_ = 0;
  std::string address_;
  std::unique_ptr<grpc::Server> server_;
  std::thread timer_;
};

Result<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(const ServerOptions& options) {
  Result<HostPort> hp = ParseListenAddress(options.listen_address);
  if (!hp.ok()) return hp.status();
  KeepCallbackQueueAlive();
  auto impl = std::make_unique<Impl>(options);
  CTRUN_RETURN_IF_ERROR(impl->AddRuns(options.runs));
  if (!options.state_dir.empty()) CTRUN_RETURN_IF_ERROR(impl->RestoreRuns(options.state_dir));
  CTRUN_RETURN_IF_ERROR(impl->Listen(*hp));
  return std::unique_ptr<RendezvousServer>(new RendezvousServer(std::move(impl)));
}

RendezvousServer::RendezvousServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RendezvousServer::~RendezvousServer() { impl_->Shutdown(); }

int RendezvousServer::port() const { return impl_->port(); }

const std::string& RendezvousServer::address() const { return impl_->address(); }

void RendezvousServer::Shutdown() { impl_->Shutdown(); }

std::string RendezvousServer::MetricsText() { return impl_->MetricsText(); }

void RendezvousServer::WhenDrained(const std::string& run_id, std::function<void()> cb) {
  impl_->WhenDrained(run_id, std::move(cb));
}

namespace {
std::atomic<bool> warn_handshake_failures{false};

// gRPC's "Security handshake failed: <status> {... target_address:"ipv4:..." ...}"
// as "TLS handshake with ipv4:... failed: <status>".
std::string HandshakeLine(const std::string& message) {
  std::string peer = "a client";
  const std::string key = "target_address:\"";
  if (size_t at = message.find(key); at != std::string::npos) {
    size_t end = message.find('"', at + key.size());
    if (end != std::string::npos) peer = message.substr(at + key.size(), end - at - key.size());
  }
  std::string what = message.substr(0, message.find(" {"));
  if (what.rfind("Security handshake failed: ", 0) == 0) what = what.substr(27);
  return "TLS handshake with " + peer + " failed: " + what +
         " (its CA, certificate or TLS setting does not match this server's: see docs/security.md)";
}
}  // namespace

void RouteGrpcLogsToSpdlog(bool warn_handshakes) {
  warn_handshake_failures = warn_handshakes;
  // protobuf logs each refused message (e.g. a string that is not UTF-8)
  // on stderr: a stranger could fill the log with them.
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char* file, int line, const std::string& message) {
    spdlog::debug("protobuf {}:{}: {}", file, line, message);
  });
  // The server side of a failed handshake is a debug message in gRPC.
  if (warn_handshakes) gpr_set_log_verbosity(GPR_LOG_SEVERITY_DEBUG);
  gpr_set_log_function([](gpr_log_func_args* args) {
    if (warn_handshake_failures && std::strstr(args->message, "andshake failed") != nullptr) {
      static std::atomic<int64_t> next_ns{0};
      const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
      int64_t due = next_ns.load();
      if (now >= due && next_ns.compare_exchange_strong(due, now + 1'000'000'000)) {
        spdlog::warn("{}", HandshakeLine(args->message));
      }
      return;
    }
    spdlog::debug("grpc {}:{}: {}", args->file, args->line, args->message);
  });
}

}  // namespace ctrun::rdzv
