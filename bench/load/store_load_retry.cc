// store_load's connect retry policy: see store_load_retry.h.
#include "store_load_retry.h"

#include <algorithm>
#include <cerrno>
#include <cmath>

namespace store_load {

namespace {
constexpr double kInitialMs = 500;
constexpr double kMultiplier = 1.5;
constexpr double kJitter = 0.5;
constexpr double kMaxMs = 60000;
}  // namespace

bool RetryableConnectError(int err) { return err == ECONNREFUSED || err == ECONNRESET || err == ETIMEDOUT; }

std::chrono::milliseconds RetryDelay(int attempt, double unit) {
  const double base = std::min(kMaxMs, kInitialMs * std::pow(kMultiplier, std::clamp(attempt, 0, 64)));
  const double u = std::clamp(unit, 0.0, 1.0);
  const double ms = std::min(kMaxMs, base * (1 - kJitter + 2 * kJitter * u));
  return std::chrono::milliseconds(static_cast<long>(ms));
}

}  // namespace store_load
