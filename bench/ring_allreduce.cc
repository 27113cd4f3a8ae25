// ring_allreduce: one member of an AbortableRing (trainer/comm/abortable_ring.h)
// for bench/ring_allreduce.sh. The members find each other through files in
// a directory the driver made: each listens at port 0, writes its port to
// DIR/port-<rank> (atomically), waits (bounded) for its right neighbour's,
// connects, all-reduces FLOATS floats WARMUP + REPS times and prints, on
// rank 0, one line: "RING seconds=<t1>,<t2>,..." (the timed calls). Exit 1
// with one line on any error.
//
//   ring_allreduce RANK SIZE DIR FLOATS REPS
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "trainer/comm/abortable_ring.h"

namespace {

constexpr int kWarmup = 2;

int Fail(const std::string& why) {
  std::fprintf(stderr, "ring_allreduce: %s\n", why.c_str());
  return 1;
}

// The right neighbour's port, once its file exists (at most 60 s).
long WaitForPort(const std::string& dir, int rank) {
  const std::string path = dir + "/port-" + std::to_string(rank);
  for (int i = 0; i < 6000; ++i) {
    std::ifstream in(path);
    long port = 0;
    if (in >> port) return port;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) return Fail("usage: ring_allreduce RANK SIZE DIR FLOATS REPS");
  const int rank = std::atoi(argv[1]), size = std::atoi(argv[2]), reps = std::atoi(argv[5]);
  const std::string dir = argv[3];
  const std::size_t floats = std::strtoull(argv[4], nullptr, 10);
  ctrun::trainer::RingOptions options;
  options.ring_id = 1;
  options.rank = rank;
  options.size = size;
  options.listen_host = "127.0.0.1";
  auto ring = ctrun::trainer::AbortableRing::Listen(options);
  if (!ring.ok()) return Fail(ring.status().message());
  {
    const std::string path = dir + "/port-" + std::to_string(rank);
    std::ofstream(path + ".tmp") << (*ring)->port() << "\n";
    if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0) return Fail("cannot write " + path);
  }
  const long right = WaitForPort(dir, (rank + 1) % size);
  if (right < 0) return Fail("no port file from the right neighbour within 60 s");
  if (auto s = (*ring)->Connect("127.0.0.1", static_cast<std::uint16_t>(right)); !s.ok()) return Fail(s.message());
  std::vector<float> data(floats, 1.0f);
  std::string times;
  for (int i = 0; i < kWarmup + reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (auto s = (*ring)->AllReduceSum(data.data(), data.size()); !s.ok()) return Fail(s.message());
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (i >= kWarmup) times += (times.empty() ? "" : ",") + std::to_string(t);
  }
  if (rank == 0) std::printf("RING seconds=%s\n", times.c_str());
  return 0;
}
