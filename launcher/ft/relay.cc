#include "launcher/ft/relay.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <deque>

#include "base/ft_wire/agent_lines.h"
#include "base/ft_wire/fields.h"
#include "launcher/cli/text.h"

namespace ctrun::launcher {

namespace asio = boost::asio;
using Local = asio::local::stream_protocol;

// One worker's connection. `rank` is set by its first sync line.
struct FtRelay::Conn {
  explicit Conn(Local::socket s) : socket(std::move(s)), in(ft_wire::kMaxLineBytes) {}
  Local::socket socket;
  asio::streambuf in;
  std::deque<std::string> out;  // lines to write, the front one being written
  bool close_after = false;     // close once `out` is written
  bool closed = false;
  bool done = false;  // said `done`: its close is no failure
  int rank = -1;
};

FtRelay::FtRelay(asio::io_context& io, FtRelayOptions options, FtQuorumLink& link, EventLog* events)
    : io_(io),
      options_(std::move(options)),
      link_(link),
      events_(events),
      acceptor_(io),
      ranks_(static_cast<size_t>(options_.nproc)),
      step_(options_.group, options_.host, options_.nproc),
      waiting_timer_(io),
      retry_timer_(io),
      healed_(static_cast<size_t>(options_.nproc)),
      alive_(std::make_shared<bool>(true)) {}

FtRelay::~FtRelay() {
  *alive_ = false;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  waiting_timer_.cancel();
  retry_timer_.cancel();
  for (auto& conn : ranks_) {
    if (conn) conn->socket.close(ignored);
  }
}

Status FtRelay::Listen() {
  boost::system::error_code ec;
  const Local::endpoint at(std::string(1, '\0') + options_.socket_name);
  acceptor_.open(at.protocol(), ec);
  if (!ec) acceptor_.bind(at, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::IOError(fmt::format("cannot listen on the workers' fault-tolerance socket {}: {}", socket_env(),
                                       ec.message()));
  }
  Accept();
  return Status::Ok();
}

void FtRelay::Accept() {
  acceptor_.async_accept([this, alive = alive_](const boost::system::error_code& ec, Local::socket socket) {
    if (!*alive || ec == asio::error::operation_aborted) return;
    if (!ec) Read(std::make_shared<Conn>(std::move(socket)));
    Accept();
  });
}

void FtRelay::Read(const std::shared_ptr<Conn>& conn) {
  asio::async_read_until(conn->socket, conn->in, '\n',
                         [this, conn, alive = alive_](const boost::system::error_code& ec, size_t n) {
                           if (!*alive || conn->closed) return;
                           if (ec == asio::error::not_found) {
                             Refuse(conn, "a line longer than 4096 bytes");
                             return;
                           }
                           if (ec) {
                             OnClosed(conn, ec == asio::error::eof ? "closed its link" : ec.message());
                             return;
                           }
                           std::string line(asio::buffers_begin(conn->in.data()),
                                            asio::buffers_begin(conn->in.data()) + static_cast<std::ptrdiff_t>(n) - 1);
                           conn->in.consume(n);
                           OnLine(conn, line);
                           if (!conn->closed) Read(conn);
                         });
}

void FtRelay::OnLine(const std::shared_ptr<Conn>& conn, std::string_view line) {
  Result<ft_wire::WorkerLine> parsed = ft_wire::ParseWorkerLine(line);
  if (!parsed.ok()) {
    Refuse(conn, parsed.status().message());
    return;
  }
  if (const auto* sync = std::get_if<ft_wire::SyncLine>(&*parsed)) {
    OnSync(conn, *sync);
  } else if (const auto* healed = std::get_if<ft_wire::HealedLine>(&*parsed)) {
    OnHealed(*healed);
  } else {
    OnDone(conn, std::get<ft_wire::DoneLine>(*parsed));
  }
}

void FtRelay::OnSync(const std::shared_ptr<Conn>& conn, const ft_wire::SyncLine& line) {
  if (line.local_rank >= options_.nproc) {
    Refuse(conn, fmt::format("local rank {} is not one of this node's {} workers", line.local_rank, options_.nproc));
    return;
  }
  if (conn->rank >= 0 && conn->rank != line.local_rank) {
    Refuse(conn, fmt::format("this link belongs to local rank {}, not {}", conn->rank, line.local_rank));
    return;
  }
  std::shared_ptr<Conn>& slot = ranks_[static_cast<size_t>(line.local_rank)];
  if (slot && slot != conn) OnClosed(slot, "was replaced by a new link for the same local rank");
  slot = conn;
  conn->rank = line.local_rank;
  if (Status s = step_.Add(line); !s.ok()) {
    Refuse(conn, s.message());
    return;
  }
  if (!step_.complete()) return;
  Result<rdzv::SyncCall> call = step_.Call();
  if (!call.ok()) {
    ToAllRanks(ft_wire::FormatError(call.status().message()), /*close=*/true);
    return;
  }
  left_ = false;
  if (call->ballot && quorum_id_ == call->ballot->quorum_id) call->ballot->world = quorum_world_;
  if (!call->ballot) {
    spdlog::info("replica group {} asks to join the quorum at step {}", options_.group, call->committed_step);
  }
  asking_ = true;
  asked_at_ = std::chrono::steady_clock::now();
  asked_step_ = call->committed_step;
  call_ = std::move(*call);
  told_unreachable_ = false;
  ArmWaitingLine(generation_);
  SendCall(generation_);
}

void FtRelay::SendCall(uint64_t generation) {
  link_.Sync(call_, part_, [this, generation, alive = alive_](const Result<rdzv::SyncAnswer>& answer) {
    if (*alive) OnAnswer(generation, answer);
  });
}

void FtRelay::ArmWaitingLine(uint64_t generation) {
  waiting_timer_.expires_after(options_.waiting_every);
  waiting_timer_.async_wait([this, generation, alive = alive_](const boost::system::error_code& ec) {
    if (ec || !*alive || !asking_ || generation != generation_) return;
    const auto now = std::chrono::steady_clock::now();
    const auto seconds = [](std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); };
    spdlog::info("{}", QuorumWaitingLine(options_.min_groups, asked_step_, options_.endpoint, options_.run_id,
                                         seconds(now - asked_at_),
                                         seconds(asked_at_ + options_.give_up_after - now)));
    ArmWaitingLine(generation);
  });
}

void FtRelay::OnAnswer(uint64_t generation, const Result<rdzv::SyncAnswer>& answer) {
  if (generation != generation_) return;  // a failure since: that step is gone
  if (!answer.ok() && answer.status().IsAborted()) return;  // replaced by a newer call
  // The server went away with the call (ctrund restarted, a connection
  // broken): the same call again, which waits for the server to be back.
  // The server knows only its answer, so asking twice loses nothing; its
  // ballot counts if the server still holds the vote, else the step in
  // flight is trained again.
  if (!answer.ok() && answer.status().IsUnavailable() &&
      std::chrono::steady_clock::now() - asked_at_ < options_.give_up_after) {
    if (!told_unreachable_) {
      spdlog::warn("lost the quorum server with this group's step call ({}): asking again once it is back",
                   answer.status().message());
      told_unreachable_ = true;
    }
    retry_timer_.expires_after(std::chrono::milliseconds(50));  // never a busy loop on a server that refuses at once
    retry_timer_.async_wait([this, generation, alive = alive_](const boost::system::error_code& ec) {
      if (!ec && *alive && generation == generation_) SendCall(generation);
    });
    return;
  }
  asking_ = false;
  waiting_timer_.cancel();
  if (!answer.ok()) {
    const std::string why =
        answer.status().IsDeadlineExceeded()
            ? "no quorum within --rdzv-conf join_timeout (" + answer.status().message() +
                  "): check that the quorum server runs at --rdzv-endpoint and that at least MIN groups of "
                  "--ft-replicas take part"
            : "the quorum server refused this group's call: " + answer.status().message();
    ToAllRanks(ft_wire::FormatError(why), /*close=*/true);
    return;
  }
  step_.Reset();
  if (answer->finished_step) {
    spdlog::info("the run finished at step {} before replica group {} rejoined: nothing is left to train",
                 *answer->finished_step, options_.group);
    ToAllRanks(ft_wire::FormatFinished(*answer->finished_step));
    return;
  }
  Result<std::vector<ft_wire::QuorumLine>> per_rank =
      FtRankAnswers(*answer, options_.group, options_.nproc, part_, options_.parts);
  if (!per_rank.ok()) {
    ToAllRanks(ft_wire::FormatError(per_rank.status().message()), /*close=*/true);
    return;
  }
  const ft_wire::QuorumLine& a = per_rank->front();
  if (quorum_id_ != a.quorum_id) {
    quorum_id_ = a.quorum_id;
    quorum_world_ = a.replica_world;
    Emit("quorum_changed", QuorumChangedFields(*answer, a));
    spdlog::info("replica group {} trains step {} in quorum {} as replica {} of {}", options_.group, a.max_step,
                 a.quorum_id, a.replica_rank, a.replica_world);
  }
  if (!a.heal_sources.empty()) {
    for (auto& h : healed_) h.reset();
    Emit("replica_healing", {{"quorum_id", a.quorum_id}, {"step", a.max_step}, {"sources", a.heal_sources}});
    spdlog::info("replica group {} heals to step {} from {}", options_.group, a.max_step, a.heal_sources.front());
  }
  for (size_t r = 0; r < per_rank->size(); ++r) {
    if (ranks_[r]) Send(ranks_[r], ft_wire::FormatQuorum((*per_rank)[r]));
  }
}

nlohmann::ordered_json QuorumChangedFields(const rdzv::SyncAnswer& answer, const ft_wire::QuorumLine& first) {
  nlohmann::ordered_json fields = {{"quorum_id", first.quorum_id}, {"replica_rank", first.replica_rank},
                                   {"replica_world", first.replica_world}, {"max_step", first.max_step}};
  // A compact answer lists the members only in a small quorum
  // (rdzv::kCompactMembersMax): above it the event has no `members`.
  const std::vector<rdzv::QuorumMember>& listed = answer.part ? answer.part->members : answer.quorum->members;
  if (answer.part && listed.empty()) return fields;
  nlohmann::ordered_json members = nlohmann::ordered_json::array();
  for (const auto& m : listed) members.push_back({{"group", m.id}, {"step", m.step}});
  fields["members"] = std::move(members);
  return fields;
}

void FtRelay::OnHealed(const ft_wire::HealedLine& line) {
  if (line.local_rank >= options_.nproc) return;
  healed_[static_cast<size_t>(line.local_rank)] = line;
  uint64_t bytes = 0;
  double seconds = 0;
  std::vector<std::string> sources;
  for (const auto& h : healed_) {
    if (!h || h->step != line.step) return;
    bytes += h->bytes;
    seconds = std::max(seconds, h->seconds);
    sources.push_back(h->source);
  }
  for (auto& h : healed_) h.reset();
  Emit("replica_healed", {{"step", line.step}, {"bytes", bytes}, {"seconds", seconds}, {"sources", sources}});
  spdlog::info("replica group {} healed to step {}: {} bytes in {:.3f} s", options_.group, line.step, bytes,
               seconds);
}

void FtRelay::OnDone(const std::shared_ptr<Conn>& conn, const ft_wire::DoneLine& line) {
  if (conn->rank < 0 || conn->rank != line.local_rank) {
    Refuse(conn, fmt::format("'done' from local rank {} on a link that is not its own", line.local_rank));
    return;
  }
  conn->done = true;
  finished_step_ = std::max(finished_step_, line.step);
  for (const auto& c : ranks_) {
    if (!c || !c->done) return;  // the others are still training
  }
  link_.Finished(finished_step_, [this, alive = alive_] {
    if (!*alive) return;
    for (const auto& c : ranks_) {
      if (c && c->done) Send(c, ft_wire::FormatBye());
    }
  });
}

void FtRelay::OnLost(const std::string& group, int64_t quorum_id, const std::string& reason) {
  if (group == options_.group) return;
  spdlog::info("replica group {} of quorum {} was lost ({}); aborting this step's cross-replica all-reduce", group,
               quorum_id, reason);
  ToAllRanks(ft_wire::FormatAbort(fmt::format("replica group {} of quorum {} was lost: {}", group, quorum_id, reason)));
}

void FtRelay::OnClosed(const std::shared_ptr<Conn>& conn, const std::string& why) {
  if (conn->closed) return;
  conn->closed = true;
  boost::system::error_code ignored;
  conn->socket.close(ignored);
  if (conn->rank < 0) return;
  std::shared_ptr<Conn>& slot = ranks_[static_cast<size_t>(conn->rank)];
  if (slot == conn) slot.reset();
  if (conn->done) return;  // it finished: its group did not fail
  ++generation_;
  asking_ = false;
  waiting_timer_.cancel();
  step_.Reset();
  if (left_) return;
  left_ = true;
  const std::string reason = fmt::format("local rank {}'s worker {}", conn->rank, why);
  spdlog::info("replica group {} leaves the quorum: {}", options_.group, reason);
  link_.Leave(reason);
}

void FtRelay::ToAllRanks(const std::string& line, bool close) {
  for (auto& conn : ranks_) {
    if (conn) Send(conn, line, close);
  }
}

void FtRelay::Refuse(const std::shared_ptr<Conn>& conn, const std::string& why) {
  spdlog::warn("a worker's fault-tolerance line was refused: {}", why);
  Send(conn, ft_wire::FormatError(why), /*close_after=*/true);
}

void FtRelay::Send(const std::shared_ptr<Conn>& conn, std::string line, bool close_after) {
  if (conn->closed) return;
  conn->close_after = conn->close_after || close_after;
  conn->out.push_back(std::move(line));
  if (conn->out.size() == 1) WriteNext(conn);  // else the write in flight goes on to it
}

void FtRelay::WriteNext(const std::shared_ptr<Conn>& conn) {
  asio::async_write(conn->socket, asio::buffer(conn->out.front()),
                    [this, conn, alive = alive_](const boost::system::error_code& ec, size_t) {
                      if (!*alive || conn->closed) return;
                      conn->out.pop_front();
                      if (ec) {
                        OnClosed(conn, ec.message());
                      } else if (!conn->out.empty()) {
                        WriteNext(conn);
                      } else if (conn->close_after) {
                        OnClosed(conn, "was refused");
                      }
                    });
}

std::string QuorumWaitingLine(int min_groups, int64_t step, std::string_view endpoint, std::string_view run_id,
                              double waited_s, double give_up_in_s) {
  return fmt::format("waiting for a quorum of at least {} replica group{} at {}, run '{}' (this group is at step {}, "
                     "asked {} s ago); giving up in {} s",
                     min_groups, min_groups == 1 ? "" : "s", endpoint, run_id, step,
                     static_cast<long>(std::max(0.0, waited_s)), SecondsUp(give_up_in_s));
}

void FtRelay::Emit(std::string_view event, const nlohmann::ordered_json& fields) {
  if (events_ != nullptr) events_->Emit(event, fields);
}

}  // namespace ctrun::launcher
