// Failure reports in the rendezvous (`ctrun status --why`): what one failed
// worker's agent tells the run, the bounds a report must meet (the server
// refuses one that does not, before it keeps anything), and FailureRecord,
// the bounded set of reports one run keeps.
//
// An agent whose workers failed reports each failed worker once per failed
// attempt, before it restarts the group or exits; the run may be closed by
// then (a late node), and a closed run the server still holds takes it.
//
// Pure data and functions, no I/O and no clock reads (times are arguments).
// FailureRecord is not thread-safe: the server's owner of the run calls it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "rendezvous/machine/node_order.h"

namespace ctrun::rdzv {

// The bounds of one ReportFailure request (proto/rendezvous.proto).
inline constexpr size_t kMaxFailuresPerReport = 64;
inline constexpr size_t kMaxFailureText = 1024;  // error_message, last_line (bytes)
inline constexpr size_t kMaxFailurePath = 4096;  // stacks_file, error_file (bytes)
inline constexpr size_t kMaxFailureHost = 256;   // the reporting node's host name (bytes)
// What a run keeps: the earliest failures by failure time, and the newest
// by arrival (a late restart's failures stay visible too).
inline constexpr size_t kKeptEarliestFailures = 32;
inline constexpr size_t kKeptNewestFailures = 32;

// One failed worker, as its agent saw it.
struct WorkerFailureInfo {
  int rank = 0;        // global rank
  int local_rank = 0;
  int exit_code = 0;   // its exit status; 0 when killed by a signal
  int signal = 0;      // the signal that killed it; 0 when it exited
  double failed_at_unix_s = 0;  // when it failed (its error file, else when the agent saw the exit)
  std::string error_message;    // the error file's message, first line ("" none)
  std::string last_line;        // its traceback's last non-empty line ("" none)
  std::string stacks_file;      // hang forensics' saved stacks on the node ("" none)
  std::string error_file;       // its TORCHELASTIC_ERROR_FILE when it wrote one ("" none)
  int pid = 0;
  // The agent stopped it itself (a restart, a peer's failure): a
  // consequence by construction.
  bool stopped_by_agent = false;
  // error_message and last_line were read from its stderr, as the agent
  // kept it: it wrote no error file (a script without @record).
  bool from_stderr = false;
  // The evidence for its class (failure_class.h, the verdict):
  int64_t oom_kills_before = -1;  // its cgroup's oom_kill count when it started; -1 unreadable
  int64_t oom_kills_after = -1;   // the same when it was seen to fail; -1 unreadable
  double runtime_s = -1;          // from its start to its exit; < 0 unknown
  int64_t max_rss_kib = 0;        // its peak resident memory (wait4's ru_maxrss); 0 unknown
  bool hung = false;              // its agent killed it for a missed heartbeat (its stacks saved)
  bool exec_failed = false;       // its program could not be started at all
  bool bad_launch = false;        // its attempt was a bad launch (IsBadLaunch, failure_class.h)
  std::string hang_frame;         // hung: the saved stack's innermost frame ("" none)
  // Set by the server, never by a report: a node, not a worker (rank -1).
  // node_lost: a member whose agent went away with no exit reported (its
  // stream broke, or its keep-alives stopped); unhealthy: a node that left
  // the job as unhealthy (error_message: the report's first line).
  bool node_lost = false;
  bool unhealthy = false;

  bool operator==(const WorkerFailureInfo&) const = default;
};

// A failure as the run holds it: who reported it and when.
struct ReportedFailure {
  NodeId node;
  std::string host;          // the reporting node's host name
  uint64_t round = 0;        // the rendezvous round its workers ran in
  WorkerFailureInfo failure;
  double received_age_s = 0;  // seconds since the server got it

  bool operator==(const ReportedFailure&) const = default;
};

// OK when `host` and every text of `failures` are within their bounds,
// there are at most kMaxFailuresPerReport failures, ranks are not negative,
// signals are in [0, 128), failure times are finite and not negative, the
// evidence is plausible (oom_kill counts -1 or more, runtime finite, RSS not
// negative) and no failure claims to be a node's (node_lost, unhealthy:
// the server's own records).
// Otherwise InvalidArgument with one line naming the field and the fix.
Status CheckFailureReport(std::string_view host, const std::vector<WorkerFailureInfo>& failures);

// The failures one run keeps: at most kKeptEarliestFailures +
// kKeptNewestFailures, and the count of all it was given.
class FailureRecord {
 public:
  // Adds `failures` (checked with CheckFailureReport by the caller) from
  // `node`, received at `now`; then drops what is neither among the
  // earliest by failure time (ties: lower rank, then earlier arrival) nor
  // among the newest by arrival.
  void Add(const NodeId& node, const std::string& host, uint64_t round,
           const std::vector<WorkerFailureInfo>& failures, TimePoint now);

  // The kept failures, earliest failure time first (ties: lower rank, then
  // earlier arrival), each with its age at `now`.
  std::vector<ReportedFailure> Kept(TimePoint now) const;

  // A node the server saw go (node_lost) or leave as unhealthy, at
  // `failed_at_unix_s` (the server's wall clock): one record of rank -1,
  // kept like a worker's. `why`: the error message.
  void AddNode(const NodeId& node, uint64_t round, bool lost, const std::string& why, double failed_at_unix_s,
               TimePoint now);

  // Failures added in all, the dropped ones included.
  int64_t seen() const { return seen_; }

 private:
  struct Entry {
    ReportedFailure failure;  // received_age_s unset
    TimePoint received;
    uint64_t seq = 0;  // arrival order
  };
  std::vector<Entry> entries_;  // earliest first (the Kept order)
  int64_t seen_ = 0;
  uint64_t next_seq_ = 0;
};

}  // namespace ctrun::rdzv
