// ThreadCpuSeconds (trainer/parallel/thread_cpu_clock.h): it reads the
// calling thread's CPU time, which grows while the thread works.
#include <catch2/catch.hpp>

#include "trainer/parallel/thread_cpu_clock.h"

namespace ct = ctrun::trainer;

TEST_CASE("ThreadCpuSeconds: the calling thread's CPU time grows while it works") {
  const double start = ct::ThreadCpuSeconds();
  CHECK(start > 0);
  volatile double sink = 0;
  double now = start;
  // Work until the clock moves (it ticks at least every scheduler tick).
  for (long i = 0; now <= start && i < 2'000'000'000L; ++i) {
    sink = sink + 1.0;
    if (i % 100000 == 0) now = ct::ThreadCpuSeconds();
  }
  CHECK(now > start);
}
