// What the FtRuns unit tests share (ft_runs_test.cc, ft_runs_parts_test.cc):
// quorum parameters with short timeouts and a made-up clock's start.
#pragma once

#include <chrono>

#include "rendezvous/machine/quorum.h"

namespace ctrun::rdzv::test {

// MIN:MAX with a 5 s join timeout and a 1 s heartbeat timeout.
inline QuorumParams FtTestParams(int min, int max) {
  return QuorumParams{.min_replicas = min, .max_replicas = max, .join_timeout = std::chrono::seconds(5),
                      .heartbeat_timeout = std::chrono::seconds(1)};
}

inline const TimePoint t0 = TimePoint{} + std::chrono::seconds(1000);

}  // namespace ctrun::rdzv::test
