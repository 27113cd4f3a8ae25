// AbortableRing: sums and their bits for N = 1, 2, 3, 5 members (threads of
// this process over 127.0.0.1), Abort() from another thread, a closed peer,
// the stall timeout, and refused handshakes. Waits are observed through
// RingOptions::before_wait, never by sleeping.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "trainer/comm/abortable_ring.h"
#include "trainer/comm/ring_wire.h"

namespace ct = ctrun::trainer;

namespace {

using RingPtr = std::unique_ptr<ct::AbortableRing>;

RingPtr RingTestListen(ct::RingOptions options) {
  options.listen_host = "127.0.0.1";
  auto ring = ct::AbortableRing::Listen(std::move(options));
  REQUIRE(ring.ok());
  return std::move(ring).value();
}

// N connected members; options_for(rank) gives each member's options.
std::vector<RingPtr> RingTestConnect(int n, const std::function<ct::RingOptions(int)>& options_for) {
  std::vector<RingPtr> rings;
  for (int r = 0; r < n; ++r) rings.push_back(RingTestListen(options_for(r)));
  std::vector<ctrun::Status> statuses(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    const std::uint16_t right_port = rings[(r + 1) % n]->port();
    threads.emplace_back([&, r, right_port] { statuses[r] = rings[r]->Connect("127.0.0.1", right_port); });
  }
  for (auto& t : threads) t.join();
  for (const auto& s : statuses) REQUIRE(s.ToString() == "OK");
  return rings;
}

ct::RingOptions RingTestOptions(int rank, int size, std::uint64_t ring_id = 7) {
  ct::RingOptions options;
  options.ring_id = ring_id;
  options.rank = rank;
  options.size = size;
  return options;
}

// Every member's AllReduceSum at once; their statuses.
std::vector<ctrun::Status> RingTestAllReduce(std::vector<RingPtr>& rings, std::vector<std::vector<float>>& data) {
  std::vector<ctrun::Status> statuses(rings.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < rings.size(); ++r) {
    threads.emplace_back([&, r] { statuses[r] = rings[r]->AllReduceSum(data[r].data(), data[r].size()); });
  }
  for (auto& t : threads) t.join();
  return statuses;
}

// Random floats over many magnitudes, so the order of the additions shows.
std::vector<float> RingTestValues(std::size_t count, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<float> out(count);
  for (auto& v : out) v = std::ldexp(mantissa(gen), exponent(gen));
  return out;
}

// The documented order: segment k summed from member k on, left to right.
std::vector<float> RingTestExpected(const std::vector<std::vector<float>>& inputs) {
  const int n = static_cast<int>(inputs.size());
  const std::size_t count = inputs[0].size();
  std::vector<float> out(count);
  std::size_t offset = 0;
  for (int k = 0; k < n; ++k) {
    const std::size_t len = count / n + (static_cast<std::size_t>(k) < count % n ? 1 : 0);
    for (std::size_t i = offset; i < offset + len; ++i) {
      float acc = inputs[k][i];
      for (int j = 1; j < n; ++j) acc = acc + inputs[(k + j) % n][i];
      out[i] = acc;
    }
    offset += len;
  }
  return out;
}

// Records which members wait in an all-reduce (or any `needle`), for the
// test thread to wait on.
struct RingTestWaitFlag {
  std::mutex mu;
  std::condition_variable cv;
  std::set<int> waiting;

  std::function<void(std::string_view)> Hook(std::string needle, int member) {
    return [this, needle, member](std::string_view what) {
      if (what.find(needle) == std::string_view::npos) return;
      std::lock_guard<std::mutex> lock(mu);
      waiting.insert(member);
      cv.notify_all();
    };
  }
  // Until `n` distinct members have waited.
  void WaitFor(std::size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return waiting.size() >= n; });
  }
};

// A plain client socket connected to 127.0.0.1:port (blocking).
int RingTestDial(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  return fd;
}

}  // namespace

TEST_CASE("AbortableRing: sums are right and bitwise equal on every member") {
  for (int n : {1, 2, 3, 5}) {
    auto rings = RingTestConnect(n, [n](int r) { return RingTestOptions(r, n); });
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000003}}) {
      INFO("N = " << n << ", count = " << count);
      std::vector<std::vector<float>> inputs;
      for (int r = 0; r < n; ++r) inputs.push_back(RingTestValues(count, 1000u * n + r));
      auto data = inputs;
      for (const auto& s : RingTestAllReduce(rings, data)) REQUIRE(s.ToString() == "OK");
      const auto expected = RingTestExpected(inputs);
      for (int r = 0; r < n; ++r) {
        REQUIRE(data[r].size() == count);
        CHECK((count == 0 || std::memcmp(data[r].data(), expected.data(), count * sizeof(float)) == 0));
      }
    }
  }
}

TEST_CASE("AbortableRing: small chunks, more members than elements") {
  auto rings = RingTestConnect(3, [](int r) {
    auto options = RingTestOptions(r, 3);
    options.chunk_bytes = 8;  // every segment in many partial chunks
    return options;
  });
  for (std::size_t count : {std::size_t{2}, std::size_t{1001}}) {
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < 3; ++r) inputs.push_back(RingTestValues(count, 77u + r));
    auto data = inputs;
    for (const auto& s : RingTestAllReduce(rings, data)) REQUIRE(s.ToString() == "OK");
    const auto expected = RingTestExpected(inputs);
    for (const auto& d : data) CHECK(std::memcmp(d.data(), expected.data(), count * sizeof(float)) == 0);
  }
}

TEST_CASE("AbortableRing: Abort from another thread unblocks an all-reduce") {
  RingTestWaitFlag flag;
  auto rings = RingTestConnect(2, [&](int r) {
    auto options = RingTestOptions(r, 2);
    if (r == 0) options.before_wait = flag.Hook("all-reduce", r);
    return options;
  });
  std::vector<float> data(100, 1.0f);
  ctrun::Status status;
  std::thread member([&] { status = rings[0]->AllReduceSum(data.data(), data.size()); });
  flag.WaitFor(1);  // rank 0 waits in the all-reduce; rank 1 never calls it
  rings[0]->Abort();
  member.join();
  CHECK(status.IsAborted());
  CHECK(status.message().rfind("ring 7 rank 0: aborted ", 0) == 0);
  CHECK(status.message().find("all-reduce #0") != std::string::npos);
  CHECK(rings[0]->broken());
  auto again = rings[0]->AllReduceSum(data.data(), data.size());
  CHECK(again.code() == ctrun::Status::Code::kFailedPrecondition);
  CHECK(again.message().find("unusable after an earlier failure") != std::string::npos);
  // The aborted member closed its sockets: its peer's all-reduce fails too.
  auto peer = rings[1]->AllReduceSum(data.data(), data.size());
  CHECK(peer.IsUnavailable());
  CHECK(peer.message().find("closed the connection") != std::string::npos);
}

TEST_CASE("AbortableRing: Abort stops Connect, and a later call") {
  RingTestWaitFlag flag;
  auto options = RingTestOptions(0, 2);
  options.before_wait = flag.Hook("left neighbour", 0);
  auto ring = RingTestListen(options);
  auto lonely = RingTestListen(RingTestOptions(1, 2));  // listens, never connects
  ctrun::Status status;
  std::thread member([&] { status = ring->Connect("127.0.0.1", lonely->port()); });
  flag.WaitFor(1);
  ring->Abort();
  member.join();
  CHECK(status.IsAborted());
  CHECK(status.message() == "ring 7 rank 0: aborted while waiting for the left neighbour (rank 1) to connect");

  auto early = RingTestListen(RingTestOptions(0, 1));
  early->Abort();
  early->Abort();
  CHECK(early->Connect("127.0.0.1", early->port()).IsAborted());
}

TEST_CASE("AbortableRing: a peer that closes fails both neighbours") {
  RingTestWaitFlag flag;
  auto rings = RingTestConnect(3, [&](int r) {
    auto options = RingTestOptions(r, 3);
    options.stall_timeout = std::chrono::seconds(30);  // only if the close went unseen
    options.before_wait = flag.Hook("all-reduce", r);
    return options;
  });
  std::vector<std::vector<float>> data(3, std::vector<float>(1000, 1.0f));
  std::vector<ctrun::Status> statuses(3);
  std::thread left([&] { statuses[0] = rings[0]->AllReduceSum(data[0].data(), data[0].size()); });
  std::thread right([&] { statuses[2] = rings[2]->AllReduceSum(data[2].data(), data[2].size()); });
  flag.WaitFor(2);  // both wait in the all-reduce; rank 1 never calls it
  rings[1].reset();
  left.join();
  right.join();
  for (int r : {0, 2}) {
    INFO(statuses[r].ToString());
    CHECK(statuses[r].IsUnavailable());
  }
  for (int r : {0, 2}) {
    INFO(statuses[r].message());
    CHECK(statuses[r].message().find(" closed the connection ") != std::string::npos);
    CHECK(statuses[r].message().find(" all-reduce #0") != std::string::npos);
  }
}

TEST_CASE("AbortableRing: one member's abort fails every member blocked in the all-reduce") {
  // Rank 4 is alive but never calls the all-reduce: without the failure
  // travelling round the ring, rank 3 (waiting on rank 2, not on the aborted
  // rank 1) would wait for the stall timeout, as Gloo's survivors do.
  RingTestWaitFlag flag;
  auto rings = RingTestConnect(5, [&](int r) {
    auto options = RingTestOptions(r, 5);
    options.stall_timeout = std::chrono::seconds(30);  // only if the failure went unseen
    options.before_wait = flag.Hook("all-reduce", r);
    return options;
  });
  std::vector<std::vector<float>> data(4, std::vector<float>(1000, 1.0f));
  std::vector<ctrun::Status> statuses(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] { statuses[r] = rings[r]->AllReduceSum(data[r].data(), data[r].size()); });
  }
  flag.WaitFor(4);
  rings[1]->Abort();
  for (auto& t : threads) t.join();
  CHECK(statuses[1].IsAborted());
  for (int r : {0, 2, 3}) {
    INFO(statuses[r].ToString());
    CHECK(statuses[r].IsUnavailable());
  }
}

TEST_CASE("AbortableRing: the stall timeout fails a member whose peer stalls") {
  auto rings = RingTestConnect(2, [](int r) {
    auto options = RingTestOptions(r, 2);
    if (r == 0) options.stall_timeout = std::chrono::milliseconds(300);
    return options;
  });
  std::vector<float> data(10, 1.0f);
  auto status = rings[0]->AllReduceSum(data.data(), data.size());  // rank 1 never calls it
  CHECK(status.IsDeadlineExceeded());
  CHECK(status.message() == "ring 7 rank 0: no progress for 300 ms starting all-reduce #0");
}

TEST_CASE("AbortableRing: a garbage handshake is refused in one line") {
  auto ring = RingTestListen(RingTestOptions(0, 2));
  auto fake_right = ct::RingListen("127.0.0.1");  // accepts in its backlog, never answers
  REQUIRE(fake_right.ok());
  ctrun::Status status;
  std::thread member([&] { status = ring->Connect("127.0.0.1", fake_right->port); });
  const int fd = RingTestDial(ring->port());
  const std::string garbage(64 * 1024, 'G');  // far more than a handshake: only 32 bytes are read
  (void)::send(fd, garbage.data(), garbage.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  member.join();
  ::close(fd);
  ::close(fake_right->fd);
  CHECK(status.IsInvalidArgument());
  CHECK(status.message().find('\n') == std::string::npos);
  CHECK(status.message().rfind("ring 7 rank 0: refused a connection from 127.0.0.1:", 0) == 0);
  CHECK(status.message().find(": its first bytes are not a ctrun ring handshake") != std::string::npos);
}

TEST_CASE("CheckRingHello: random bytes are refused in one line") {
  std::mt19937 gen(5);
  std::uniform_int_distribution<int> byte(0, 255);
  const auto good = ct::EncodeRingHello(ct::RingHello{7, 2, 1});
  CHECK(ct::CheckRingHello(good, ct::RingHello{7, 2, 1}, "peer").ok());
  for (int i = 0; i < 20000; ++i) {
    auto bytes = good;
    // Half keep the magic, so the checks behind it see garbage too.
    for (std::size_t j = (i % 2 == 0 ? 0 : 8); j < bytes.size(); ++j) bytes[j] = static_cast<char>(byte(gen));
    const auto status = ct::CheckRingHello(bytes, ct::RingHello{7, 2, 1}, "peer");
    if (bytes == good) continue;
    REQUIRE(status.IsInvalidArgument());
    REQUIRE(status.message().rfind("peer: ", 0) == 0);
    REQUIRE(status.message().find('\n') == std::string::npos);
  }
}

TEST_CASE("AbortableRing: a short handshake and a closed connection") {
  auto ring = RingTestListen(RingTestOptions(0, 2));
  auto fake_right = ct::RingListen("127.0.0.1");
  REQUIRE(fake_right.ok());
  ctrun::Status status;
  std::thread member([&] { status = ring->Connect("127.0.0.1", fake_right->port); });
  const int fd = RingTestDial(ring->port());
  REQUIRE(::send(fd, "ctrn", 4, MSG_NOSIGNAL) == 4);
  ::close(fd);
  member.join();
  ::close(fake_right->fd);
  CHECK(status.IsUnavailable());
  CHECK(status.message().find("closed the connection during the handshake") != std::string::npos);
}

TEST_CASE("AbortableRing: a member of another ring, or a wrong rank, is refused") {
  auto check = [](std::uint64_t id_a, int rank_b, std::uint64_t id_b, const std::string& a_message) {
    auto a = RingTestListen(RingTestOptions(0, 2, id_a));
    auto b = RingTestListen(RingTestOptions(rank_b, 2, id_b));
    ctrun::Status sa;
    ctrun::Status sb;
    std::thread ta([&] { sa = a->Connect("127.0.0.1", b->port()); });
    std::thread tb([&] { sb = b->Connect("127.0.0.1", a->port()); });
    ta.join();
    tb.join();
    CHECK(sa.IsInvalidArgument());
    CHECK(sb.IsInvalidArgument());
    CHECK(sa.message().find(a_message) != std::string::npos);
    CHECK(sa.message().find('\n') == std::string::npos);
  };
  check(7, 1, 8, ": it belongs to ring 8, this member to ring 7 (a member of another quorum?)");
  check(7, 0, 7, ": it is rank 0, expected rank 1");
}

TEST_CASE("AbortableRing: members whose calls differ fail with a message") {
  auto rings = RingTestConnect(2, [](int r) { return RingTestOptions(r, 2); });
  std::vector<std::vector<float>> data = {std::vector<float>(10), std::vector<float>(20)};
  auto statuses = RingTestAllReduce(rings, data);
  CHECK(statuses[0].IsInvalidArgument());
  const std::string& m = statuses[0].message();
  CHECK(m.rfind("ring 7 rank 0: the left neighbour (rank 1 at 127.0.0.1:", 0) == 0);
  const std::string tail =
      ") is at all-reduce #0 (float sum) of 20 elements, this member at #0 (float sum) of 10 (the members' calls "
      "differ)";
  CHECK(m.size() > tail.size());
  CHECK(m.substr(m.size() - tail.size()) == tail);
  CHECK(statuses[1].IsInvalidArgument());
}

TEST_CASE("AbortableRing: members calling different operations fail with a message") {
  auto rings = RingTestConnect(2, [](int r) { return RingTestOptions(r, 2); });
  std::vector<float> floats(4);
  std::vector<std::int64_t> ints(4);
  ctrun::Status s0;
  ctrun::Status s1;
  std::thread t0([&] { s0 = rings[0]->AllReduceSum(floats.data(), floats.size()); });
  std::thread t1([&] { s1 = rings[1]->AllReduceSum(ints.data(), ints.size()); });
  t0.join();
  t1.join();
  CHECK(s0.IsInvalidArgument());
  CHECK(s0.message().find(") is at all-reduce #0 (int64 sum) of 4 elements, this member at #0 (float sum) of 4") !=
        std::string::npos);
  CHECK(s1.message().find("(float sum) of 4 elements, this member at #0 (int64 sum)") != std::string::npos);
}

// The int64 sum is exact: for N = 1..5 members, chunks smaller than a
// segment or an element, and any split of the same addends among the
// members, every member ends with the true sum.
TEST_CASE("AbortableRing: int64 sums are exact for any membership and split") {
  const std::size_t count = 37;
  std::mt19937_64 gen(11);
  // 12 addends per element, near the top of int64 so a wrong carry shows;
  // their true sum fits (12 * 2^58 < 2^62).
  std::vector<std::vector<std::int64_t>> addends(12, std::vector<std::int64_t>(count));
  std::vector<std::int64_t> want(count, 0);
  for (auto& a : addends) {
    for (std::size_t i = 0; i < count; ++i) {
      a[i] = static_cast<std::int64_t>(gen() >> 6) - (std::int64_t{1} << 57);
      want[i] += a[i];
    }
  }
  for (int n = 1; n <= 5; ++n) {
    for (std::size_t chunk : {std::size_t{4}, std::size_t{24}, std::size_t{256 * 1024}}) {
      auto rings = RingTestConnect(n, [&](int r) {
        auto options = RingTestOptions(r, n);
        options.chunk_bytes = chunk;
        return options;
      });
      // Addend k goes to member (3k + 1) mod n: its local sum.
      std::vector<std::vector<std::int64_t>> sums(n, std::vector<std::int64_t>(count, 0));
      for (std::size_t k = 0; k < 12; ++k) {
        auto& mine = sums[(3 * k + 1) % static_cast<std::size_t>(n)];
        for (std::size_t i = 0; i < count; ++i) mine[i] += addends[k][i];
      }
      std::vector<ctrun::Status> statuses(static_cast<std::size_t>(n));
      std::vector<std::thread> threads;
      for (int r = 0; r < n; ++r) {
        threads.emplace_back([&, r] { statuses[r] = rings[r]->AllReduceSum(sums[r].data(), count); });
      }
      for (auto& t : threads) t.join();
      INFO("members " << n << ", chunk " << chunk);
      for (const auto& s : statuses) CHECK(s.ToString() == "OK");
      for (int r = 0; r < n; ++r) CHECK(sums[r] == want);
    }
  }
}

TEST_CASE("AbortableRing: bad options and calls out of order") {
  auto bad = [](ct::RingOptions options) { return ct::AbortableRing::Listen(std::move(options)).status(); };
  CHECK(bad(RingTestOptions(2, 2)).message() == "ring rank 2 of 2 members: need 0 <= rank < size");
  auto odd_chunk = RingTestOptions(0, 2);
  odd_chunk.chunk_bytes = 6;
  CHECK(bad(odd_chunk).message() == "ring chunk of 6 bytes: need a multiple of 4 from 4 bytes to 64 MiB");
  auto named = RingTestOptions(0, 2);
  named.listen_host = "localhost";
  CHECK(bad(named).message() ==
        "ring: 'localhost' is not a numeric IPv4 or IPv6 address (the ring looks no names up)");
  auto ring = RingTestListen(RingTestOptions(0, 2));
  std::vector<float> data(4);
  CHECK(ring->AllReduceSum(data.data(), data.size()).message() ==
        "ring 7 rank 0: AllReduceSum called before Connect");
  CHECK(!ring->broken());
}

TEST_CASE("AbortableRing: Configure after Listen sets the ring the members then connect") {
  // Listened as three 1-member rings with id 0: configured into one ring of 3.
  std::vector<RingPtr> rings;
  for (int r = 0; r < 3; ++r) rings.push_back(RingTestListen(RingTestOptions(0, 1, 0)));
  for (int r = 0; r < 3; ++r) REQUIRE(rings[r]->Configure(42, r, 3).ok());
  CHECK(rings[1]->rank() == 1);
  CHECK(rings[1]->size() == 3);
  std::vector<ctrun::Status> statuses(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    const std::uint16_t right_port = rings[(r + 1) % 3]->port();
    threads.emplace_back([&, r, right_port] { statuses[r] = rings[r]->Connect("127.0.0.1", right_port); });
  }
  for (auto& t : threads) t.join();
  for (const auto& s : statuses) REQUIRE(s.ToString() == "OK");
  std::vector<std::vector<float>> data = {{1, 2, 3, 4}, {10, 20, 30, 40}, {100, 200, 300, 400}};
  for (const auto& s : RingTestAllReduce(rings, data)) REQUIRE(s.ok());
  for (const auto& d : data) CHECK(d == std::vector<float>({111, 222, 333, 444}));
  CHECK(rings[0]->Configure(43, 0, 3).code() == ctrun::Status::Code::kFailedPrecondition);
}

TEST_CASE("AbortableRing: Configure refuses bad values and a member of another ring") {
  auto ring = RingTestListen(RingTestOptions(0, 2));
  CHECK(ring->Configure(1, 2, 2).message() == "ring 7 rank 0: cannot configure rank 2 of 2 members: need 0 <= rank < size");
  CHECK(ring->Configure(1, -1, 2).code() == ctrun::Status::Code::kInvalidArgument);
  CHECK(ring->Configure(1, 0, 0).code() == ctrun::Status::Code::kInvalidArgument);
  CHECK(ring->rank() == 0);
  CHECK(ring->size() == 2);
  // A 2-member ring whose members were configured with different ids fails its handshake.
  std::vector<RingPtr> rings;
  for (int r = 0; r < 2; ++r) rings.push_back(RingTestListen(RingTestOptions(0, 1, 0)));
  REQUIRE(rings[0]->Configure(5, 0, 2).ok());
  REQUIRE(rings[1]->Configure(6, 1, 2).ok());
  std::vector<ctrun::Status> statuses(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    const std::uint16_t right_port = rings[(r + 1) % 2]->port();
    threads.emplace_back([&, r, right_port] { statuses[r] = rings[r]->Connect("127.0.0.1", right_port); });
  }
  for (auto& t : threads) t.join();
  CHECK(!statuses[0].ok());
  CHECK(!statuses[1].ok());
}

TEST_CASE("AbortableRing: Configure after Abort is refused") {
  auto ring = RingTestListen(RingTestOptions(0, 2));
  ring->Abort();
  CHECK(ring->Configure(1, 0, 2).code() == ctrun::Status::Code::kFailedPrecondition);
}
