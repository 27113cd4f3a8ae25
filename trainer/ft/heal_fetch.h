// FetchHealState: a behind worker fetches its local rank's state from a
// worker of a group at the quorum's max step (docs/fault-tolerance.md,
// "Healing"), over the wire in heal_wire.h, from a HealServer
// (heal_server.h). The state is an opaque byte string here. Pure
// C++/POSIX (Linux): no torch.
//
// Sources are tried in order, the assigned one first: a source fails when
// it cannot be reached, refuses (another quorum or step, busy, or it
// offered nothing within its hold bound), announces more than max_bytes,
// closes the connection before the last byte, or makes no progress for
// stall_timeout in any wait (connect, request, header, data). A source
// that holds the request because it has not offered yet counts as a stall
// while it holds it: with the defaults (stall 10 s, the server's hold 30 s)
// the fetcher moves to its next source after 10 s; it does not retry a
// source it already tried.
//
// Memory: the state grows with the bytes received (never beyond the
// announced size, which is checked against max_bytes first); a refusal's
// reason is at most kHealMaxReasonBytes.
//
// Threads: blocks the calling thread; no state of its own. abort_fd, when
// given, is the caller's (an eventfd or any descriptor that becomes
// readable to give up); it is only polled, never read or closed.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace ctrun::trainer::ft {

struct FetchOptions {
  std::chrono::milliseconds stall_timeout{10000};  // a wait that makes no progress this long fails that source
  uint64_t max_bytes = 8ull << 30;                  // a larger announced size is refused
  std::size_t chunk_bytes = 1 << 20;                // the most bytes per receive
  int abort_fd = -1;                                // optional: readable = give up (Aborted)
};

struct Fetched {
  std::string state;
  std::string source;  // the "host:port" that served it
  double seconds = 0;  // the whole call, failed sources included
};

// Fetches the state before `step` under `quorum_id` from the first source
// ("host:port", numeric host) that serves it, trying the others in order
// when one fails. Unavailable naming every source's failure when none
// served it; Aborted as soon as abort_fd is readable; InvalidArgument for
// no sources or bad options (stall_timeout and chunk_bytes must be > 0).
Result<Fetched> FetchHealState(const std::vector<std::string>& sources, int64_t quorum_id, int64_t step,
                               const FetchOptions& options);

}  // namespace ctrun::trainer::ft
