#include "store_load_retry.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>

using std::chrono::milliseconds;
using store_load::RetryableConnectError;
using store_load::RetryDelay;

TEST_CASE("the errors a torch client retries are retried, others are not") {
  CHECK(RetryableConnectError(ECONNREFUSED));
  CHECK(RetryableConnectError(ECONNRESET));
  CHECK(RetryableConnectError(ETIMEDOUT));
  CHECK_FALSE(RetryableConnectError(EADDRNOTAVAIL));
  CHECK_FALSE(RetryableConnectError(EMFILE));
  CHECK_FALSE(RetryableConnectError(0));
}

TEST_CASE("the first retry waits 500 ms within +-50 % jitter") {
  CHECK(RetryDelay(0, 0.0) == milliseconds(250));
  CHECK(RetryDelay(0, 0.5) == milliseconds(500));
  CHECK(RetryDelay(0, 0.999) >= milliseconds(749));
}

TEST_CASE("each retry waits 1.5 times the one before, up to 60 s") {
  CHECK(RetryDelay(1, 0.5) == milliseconds(750));
  CHECK(RetryDelay(2, 0.5) == milliseconds(1125));
  CHECK(RetryDelay(40, 0.5) == milliseconds(60000));
  CHECK(RetryDelay(40, 1.0) == milliseconds(60000));
  CHECK(RetryDelay(1000, 0.0) == milliseconds(30000));
}

TEST_CASE("out-of-range inputs stay within the bounds") {
  CHECK(RetryDelay(-3, 0.5) == milliseconds(500));
  CHECK(RetryDelay(0, -1.0) == milliseconds(250));
  CHECK(RetryDelay(0, 7.0) == milliseconds(750));
}
