// FtRelay: the agent's side of the worker ↔ agent socket under
// --ft-replicas (docs/fault-tolerance.md, "Worker ↔ agent: a local socket").
//
// It listens on an abstract Unix socket (no file to leave behind; its name
// goes to the workers as CTRUN_FT_SOCKET, "@" standing for the leading NUL)
// and keeps one connection per worker. Each step it gathers its local ranks'
// `sync` lines (FtGroupSync), makes the group's one call on the
// FtQuorumLink, and answers every rank with its `quorum` line. A lost member
// of the quorum (OnLost, from the quorum server's push) sends `abort` to
// every rank, so a rank blocked in the cross-replica all-reduce gives up at
// once.
//
// A worker that finished says `done`; once all have, the server learns the
// run is over (FtQuorumLink::Finished) and each gets `bye`. A `sync` after
// the run is over is answered `finished <step>`. A worker's connection that
// closes (the worker exited or died) without having said `done` fails the
// group's step: the relay leaves the quorum (FtQuorumLink::Leave), forgets
// the step, drops any answer still due for it, and waits for the next
// workers' lines (the agent restarts the group as after any failure). A
// line it cannot read, or one longer than ft_wire::kMaxLineBytes, gets `error <why>` and
// its connection is closed.
//
// While the group's call waits for its answer, it logs QuorumWaitingLine
// every `waiting_every` (the quorum forms when MIN groups have asked).
//
// Events (--events-file): "quorum_changed" when an answer brings a new
// quorum id (its members, this group's replica rank, the step; no members
// when the answer was compact and the quorum has more than
// rdzv::kCompactMembersMax groups: QuorumChangedFields), a line
// "replica_healing" when the group must heal first (its sources), and
// "replica_healed" once every rank reported `healed` (bytes, seconds, and
// the source each local rank healed from).
//
// Thread model: the io_context's thread only; the link's callbacks must be
// posted there. Borrows the io_context, the link and the event log: they
// outlive the relay.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/ft_wire/worker_lines.h"
#include "base/result.h"
#include "launcher/ft/group_sync.h"
#include "launcher/ft/quorum_link.h"
#include "launcher/logs/event_log.h"

namespace ctrun::launcher {

struct FtRelayOptions {
  std::string group;       // this replica group's id
  std::string host;        // the numeric address other groups reach this node at
  int nproc = 1;           // the workers of this node (<= kFtMaxLocalRanks)
  int parts = 1;           // the group's nodes (--ft-group-size)
  std::string socket_name; // the abstract socket's name, without the leading NUL
  // For the waiting line: where the quorum is served, the run, --ft-replicas'
  // MIN, how long a call may wait for its quorum, and how often to say so.
  std::string endpoint{};
  std::string run_id{};
  int min_groups = 1;
  std::chrono::steady_clock::duration give_up_after = std::chrono::seconds(600);
  std::chrono::steady_clock::duration waiting_every = std::chrono::seconds(5);
};

// The line logged while a group's step call waits for its answer: `min_groups`
// is --ft-replicas' MIN, `step` the group's committed step, `waited_s` the
// time since it asked. Pure.
//   "waiting for a quorum of at least 2 replica groups at HOST:PORT, run
//    'job5' (this group is at step 12, asked 10 s ago); giving up in 590 s"
std::string QuorumWaitingLine(int min_groups, int64_t step, std::string_view endpoint, std::string_view run_id,
                              double waited_s, double give_up_in_s);

// The "quorum_changed" event's fields for `answer`, whose local rank 0's
// line is `first`: quorum_id, replica_rank, replica_world, max_step, and
// `members` ({group, step} each, by group id) from the whole quorum, or
// from the compact part's list; left out when a compact answer lists none
// (a quorum above rdzv::kCompactMembersMax groups). Pure.
nlohmann::ordered_json QuorumChangedFields(const rdzv::SyncAnswer& answer, const ft_wire::QuorumLine& first);

class FtRelay {
 public:
  FtRelay(boost::asio::io_context& io, FtRelayOptions options, FtQuorumLink& link, EventLog* events);
  ~FtRelay();
  FtRelay(const FtRelay&) = delete;
  FtRelay& operator=(const FtRelay&) = delete;

  // Binds the socket and starts accepting. IOError naming the socket.
  Status Listen();
  // CTRUN_FT_SOCKET's value: "@" and the name.
  std::string socket_env() const { return "@" + options_.socket_name; }

  // This node's rank in its group for the workers of the round that
  // starts (0 until then): its part of the group's call, and the offset of
  // its local ranks among the group's ranks.
  void SetPart(int part) { part_ = part; }

  // The quorum server says `group` (a member of quorum `quorum_id`) was lost.
  void OnLost(const std::string& group, int64_t quorum_id, const std::string& reason);

 private:
  struct Conn;
  void Accept();
  void Read(const std::shared_ptr<Conn>& conn);
  void OnLine(const std::shared_ptr<Conn>& conn, std::string_view line);
  void OnSync(const std::shared_ptr<Conn>& conn, const ft_wire::SyncLine& line);
  void OnHealed(const ft_wire::HealedLine& line);
  // A rank finished; once all have, the server learns the run is over and
  // each gets `bye`.
  void OnDone(const std::shared_ptr<Conn>& conn, const ft_wire::DoneLine& line);
  void OnAnswer(uint64_t generation, const Result<rdzv::SyncAnswer>& answer);
  // A rank's connection closed or failed: the group's step fails.
  void OnClosed(const std::shared_ptr<Conn>& conn, const std::string& why);
  // Every rank's worker gets `line`; `close` then closes their connections.
  void ToAllRanks(const std::string& line, bool close = false);
  void Send(const std::shared_ptr<Conn>& conn, std::string line, bool close_after = false);
  void WriteNext(const std::shared_ptr<Conn>& conn);  // writes conn->out's front, then the rest
  void Refuse(const std::shared_ptr<Conn>& conn, const std::string& why);
  void Emit(std::string_view event, const nlohmann::ordered_json& fields);
  // Logs the waiting line every options_.waiting_every while call `generation` is unanswered.
  void ArmWaitingLine(uint64_t generation);
  // Makes the group's call (call_) for call `generation`.
  void SendCall(uint64_t generation);

  boost::asio::io_context& io_;
  FtRelayOptions options_;
  int part_ = 0;
  FtQuorumLink& link_;
  EventLog* events_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  std::vector<std::shared_ptr<Conn>> ranks_;  // by local rank; null: none yet
  FtGroupSync step_;
  uint64_t generation_ = 0;       // bumped by every failure: answers of an older one are dropped
  bool left_ = false;             // left the quorum since the last failure
  std::optional<int64_t> quorum_id_;  // the last quorum answered
  int quorum_world_ = 0;              // its groups (a ballot for it says so)
  boost::asio::steady_timer waiting_timer_;
  boost::asio::steady_timer retry_timer_;  // the call made again after the server was lost
  bool asking_ = false;                             // a call is in flight
  std::chrono::steady_clock::time_point asked_at_;  // when the call in flight was made
  int64_t asked_step_ = 0;                          // its committed step
  rdzv::SyncCall call_;                             // the call in flight: made again when the server was lost
  bool told_unreachable_ = false;                   // logged the server's loss for the call in flight
  int64_t finished_step_ = 0;     // the step the ranks that said `done` finished at
  std::vector<std::optional<ft_wire::HealedLine>> healed_;
  std::shared_ptr<bool> alive_;   // callbacks posted after destruction see false
};

}  // namespace ctrun::launcher
