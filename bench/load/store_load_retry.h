// store_load's connect retry policy, the one a torch 2.x TCPStore client
// follows (torch/csrc/distributed/c10d/socket.cpp and TCPStore.cpp): a
// connect that fails with ECONNREFUSED (nothing listening yet), ECONNRESET
// (the server's accept queue was full and it reset the connection) or
// ETIMEDOUT, or a connection lost before its first reply (TCPStore's
// constructor retries its connect and first round trip together: a full
// accept queue may show only at the first send), is retried after a
// backoff, until the run's --timeout. The backoff is torch's
// ExponentialBackoffWithJitter (c10d/Backoff.hpp): 500 ms, then x1.5 per
// try, each randomized by +-50 %, at most 60 s. The same policy for every
// server, so that comparisons stay fair.
#pragma once

#include <chrono>

namespace store_load {

// True for the connect errors torch's client retries.
bool RetryableConnectError(int err);

// The wait before retry number `attempt` (0 for the first retry), with
// `unit` uniform in [0, 1) picking the point within the +-50 % jitter.
// Guarantees: 250 ms <= result <= 60 s; grows x1.5 per attempt before the cap.
std::chrono::milliseconds RetryDelay(int attempt, double unit);

}  // namespace store_load
