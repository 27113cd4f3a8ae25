// AgentLink: a worker's one connection to its agent's Unix socket
// (CTRUN_FT_SOCKET; docs/fault-tolerance.md, "Worker <-> agent: a local
// socket"). The worker sends one `sync` line per step and blocks for the
// agent's `quorum` answer; it reports a finished healing with `healed`; the
// agent may push `abort <reason>` at any time (a member of the quorum was
// lost) and `error <message>` (it refused this worker's line). The line
// codec is base/ft_wire (worker_lines.h, agent_lines.h). Pure C++/POSIX
// (Linux): no torch.
//
// Failure: the link breaks at the first of
//   - the agent closing the socket (or a read/write error): Unavailable,
//     the message saying the agent closed it;
//   - an `error <message>` line: FailedPrecondition carrying the message;
//   - a line that does not parse: a `quorum` answer that ParseQuorum
//     refuses, an unknown line, a `quorum` line while no Sync waits, or a
//     line longer than ft_wire::kMaxLineBytes: InvalidArgument saying what;
// and every later Sync or Healed returns that first failure. On a protocol
// error (InvalidArgument) the link shuts its socket down, so the agent sees
// the worker give up. A broken link is not repaired: the worker exits.
//
// Threads: one owning thread calls Sync and Healed (Connect's caller; it may
// hand the link to another thread, not share it). A reader thread, started
// by Connect and joined by the destructor, reads the agent's lines: it hands
// `quorum` answers to the waiting Sync and runs on_abort for each `abort`.
// on_abort runs on the reader thread, never after the destructor returned;
// it must be quick, thread-safe, and must not call into the link (the
// trainer calls AbortableRing::Abort() in it).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "base/ft_wire/agent_lines.h"
#include "base/ft_wire/worker_lines.h"
#include "base/result.h"

namespace ctrun::trainer::ft {

// The agent's answer to a Sync: its `quorum` line, or the run's end.
struct AgentAnswer {
  ft_wire::QuorumLine quorum;
  // `finished <step>` instead of `quorum ...`: the run finished at that
  // step before this group asked; nothing is left to train (quorum empty).
  std::optional<int64_t> finished_step = std::nullopt;
};

class AgentLink {
 public:
  using AbortHandler = std::function<void(const std::string& reason)>;

  // Connects to the agent's Unix socket at socket_path ("@name": the
  // abstract socket named "\0name", as ctrun's agent gives it) and starts
  // the reader thread. InvalidArgument for a path too long for a Unix socket,
  // Unavailable when nothing accepts there.
  static Result<std::unique_ptr<AgentLink>> Connect(const std::string& socket_path, AbortHandler on_abort);
  ~AgentLink();  // closes the socket, joins the reader thread
  AgentLink(const AgentLink&) = delete;
  AgentLink& operator=(const AgentLink&) = delete;

  // Sends the sync line and blocks until the agent's `quorum` answer (no
  // timeout of its own: the agent bounds the quorum's wait). Unavailable
  // when the agent closed the socket, FailedPrecondition carrying the
  // agent's `error <message>`, InvalidArgument for an answer that does not
  // parse.
  Result<AgentAnswer> Sync(const ft_wire::SyncLine& line);

  // Sends `healed <local_rank> <step> <source> <bytes> <seconds>`; the agent
  // does not answer. The link's failure if it is broken.
  Status Healed(int local_rank, int64_t step, const std::string& source, uint64_t bytes, double seconds);
  // `done <local_rank> <step>`: this worker finished training at `step`;
  // its link closing next is not a failure of its group. Blocks until the
  // agent's `bye` (sent once the quorum server knows the run is over), so
  // the agent cannot end before the server heard it.
  Status Done(int local_rank, int64_t step);

 private:
  AgentLink(int fd, int stop_fd, AbortHandler on_abort);
  void ReadLoop();
  Status ReadSome(std::string& pending);
  Status HandleLine(std::string_view line);
  Status SendLine(const std::string& text);
  // Sends `text` and waits for the agent's answer to it (`quorum`,
  // `finished` or `bye`).
  Result<AgentAnswer> Ask(const std::string& text);
  void Break(const Status& status);

  int fd_ = -1;
  int stop_fd_ = -1;  // eventfd: readable = the reader thread stops
  AbortHandler on_abort_;
  std::mutex mu_;
  std::condition_variable answered_;
  bool waiting_ = false;                    // a Sync or Done waits for its answer (mu_)
  std::optional<AgentAnswer> answer_;       // its answer once read (mu_)
  Status failure_;                          // the first failure; OK while the link works (mu_)
  std::thread reader_;
};

}  // namespace ctrun::trainer::ft
