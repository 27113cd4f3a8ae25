// The healing transfer (trainer/ft/heal_server.h, heal_fetch.h) over
// 127.0.0.1: a round trip of a few MB bitwise equal, a fetch that arrives
// before the offer, a source that dies mid-transfer, refusals (another
// quorum or step, busy), hostile peers on either side, and abort_fd. Fake
// sources are threads of the test; waits are on sockets, futures or the
// server's waiting() count, never a sleep that hopes.
#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <functional>
#include <future>
#include <random>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trainer/comm/ring_wire.h"
#include "trainer/ft/heal_fetch.h"
#include "trainer/ft/heal_server.h"
#include "trainer/ft/heal_wire.h"

namespace ct = ctrun::trainer;
namespace ft = ctrun::trainer::ft;
using ctrun::Status;

namespace {

std::shared_ptr<const std::string> RandomState(std::size_t size, unsigned seed) {
  std::mt19937 gen(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(gen());
  return std::make_shared<const std::string>(std::move(bytes));
}

std::unique_ptr<ft::HealServer> ServerOn127() {
  auto server = ft::HealServer::Listen("127.0.0.1");
  REQUIRE(server.ok());
  return std::move(server).value();
}

std::string Where(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

// Until the server holds `n` requests (it updates the count before each poll).
void AwaitWaiting(const ft::HealServer& server, std::size_t n) {
  while (server.waiting() != n) std::this_thread::yield();
}

// Blocking reads/writes of exactly `size` bytes on a test socket; false at
// the end of the stream.
bool ReadAll(int fd, char* out, std::size_t size) {
  std::size_t got = 0;
  while (got < size) {
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, -1);
    const ssize_t n = ::recv(fd, out + got, size - got, 0);
    if (n == 0) return false;
    if (n > 0) got += static_cast<std::size_t>(n);
  }
  return true;
}

void WriteAll(int fd, const char* data, std::size_t size) {
  std::size_t sent = 0;
  while (sent < size) {
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, -1);
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN) return;
    if (n > 0) sent += static_cast<std::size_t>(n);
  }
}

// A source played by the test: accepts one connection and runs `serve` on it.
class FakeSource {
 public:
  explicit FakeSource(std::function<void(int fd)> serve) {
    auto listener = ct::RingListen("127.0.0.1");
    REQUIRE(listener.ok());
    listen_fd_ = listener->fd;
    port_ = listener->port;
    thread_ = std::thread([this, serve = std::move(serve)] {
      pollfd p{listen_fd_, POLLIN, 0};
      ::poll(&p, 1, -1);
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      serve(fd);
      ::close(fd);
    });
  }
  ~FakeSource() {
    thread_.join();
    ::close(listen_fd_);
  }
  std::string where() const { return Where(port_); }

 private:
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

// A fake source's first act: read the fetcher's request.
ft::HealRequest ReadRequest(int fd) {
  std::array<char, ft::kHealRequestBytes> bytes{};
  REQUIRE(ReadAll(fd, bytes.data(), bytes.size()));
  auto request = ft::DecodeHealRequest(bytes);
  REQUIRE(request.ok());
  return *request;
}

void SendHeader(int fd, uint32_t kind, uint64_t size) {
  const auto header = ft::EncodeHealReply(ft::HealReply{kind, size});
  WriteAll(fd, header.data(), header.size());
}

// A port where nothing listens (bound, then closed).
std::string DeadSource() {
  auto listener = ct::RingListen("127.0.0.1");
  REQUIRE(listener.ok());
  ::close(listener->fd);
  return Where(listener->port);
}

ft::FetchOptions SmallChunks() {
  ft::FetchOptions options;
  options.chunk_bytes = 64 * 1024;
  return options;
}

}  // namespace

TEST_CASE("a few MB round trip bitwise equal", "[heal_transfer]") {
  auto server = ServerOn127();
  const auto state = RandomState(3 * 1024 * 1024 + 17, 1);
  server->Offer(4, 10, state);
  auto fetched = ft::FetchHealState({Where(server->port())}, 4, 10, SmallChunks());
  REQUIRE(fetched.ok());
  CHECK(fetched->state == *state);
  CHECK(fetched->source == Where(server->port()));
  CHECK(fetched->seconds >= 0);
  // Offers are replaced; an empty state is a state.
  server->Offer(4, 11, std::make_shared<const std::string>());
  auto empty = ft::FetchHealState({Where(server->port())}, 4, 11, {});
  REQUIRE(empty.ok());
  CHECK(empty->state.empty());
}

TEST_CASE("the send hook sees the offer's step and the state's bytes before each piece", "[heal_transfer]") {
  std::mutex mu;
  std::vector<std::pair<int64_t, std::size_t>> calls;
  auto listened = ft::HealServer::Listen("127.0.0.1", [&](int64_t step, std::size_t sent) {
    std::lock_guard<std::mutex> lock(mu);
    calls.emplace_back(step, sent);
  });
  REQUIRE(listened.ok());
  auto& server = *listened;
  const auto state = RandomState(1024 * 1024, 3);
  server->Offer(2, 7, state);
  auto fetched = ft::FetchHealState({Where(server->port())}, 2, 7, SmallChunks());
  REQUIRE(fetched.ok());
  server.reset();  // joins the server's thread: every call has been made
  REQUIRE_FALSE(calls.empty());
  CHECK(calls.front().second == 0);
  for (size_t i = 0; i < calls.size(); ++i) {
    CHECK(calls[i].first == 7);
    CHECK(calls[i].second < state->size());
    if (i > 0) CHECK(calls[i].second > calls[i - 1].second);
  }
}

TEST_CASE("a fetch that arrives before the offer is held until it comes", "[heal_transfer]") {
  auto server = ServerOn127();
  const bool stale_offer = GENERATE(false, true);
  if (stale_offer) server->Offer(3, 9, RandomState(100, 2));  // an older quorum's offer: still held
  const auto state = RandomState(200000, 3);
  auto fetching = std::async(std::launch::async, [&] {
    return ft::FetchHealState({Where(server->port())}, 4, 10, SmallChunks());
  });
  AwaitWaiting(*server, 1);
  server->Offer(4, 10, state);
  auto fetched = fetching.get();
  REQUIRE(fetched.ok());
  CHECK(fetched->state == *state);
  AwaitWaiting(*server, 0);
}

TEST_CASE("another quorum or step than the offer is refused in one line", "[heal_transfer]") {
  auto server = ServerOn127();
  server->Offer(5, 10, RandomState(1000, 4));
  auto older = ft::FetchHealState({Where(server->port())}, 4, 10, {});
  REQUIRE_FALSE(older.ok());
  CHECK(older.status().code() == Status::Code::kUnavailable);
  CHECK_THAT(older.status().message(),
             Catch::Contains("offers the state before step 10 of quorum 5, not before step 10 of quorum 4"));
  auto other_step = ft::FetchHealState({Where(server->port())}, 5, 11, {});
  REQUIRE_FALSE(other_step.ok());
  CHECK_THAT(other_step.status().message(), Catch::Contains("not before step 11 of quorum 5"));
  CHECK(older.status().message().find('\n') == std::string::npos);

  // A held request is refused when a non-matching offer arrives.
  server->Withdraw();
  auto fetching = std::async(std::launch::async, [&] { return ft::FetchHealState({Where(server->port())}, 6, 1, {}); });
  AwaitWaiting(*server, 1);
  server->Offer(6, 2, RandomState(10, 5));
  auto refused = fetching.get();
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.status().message(), Catch::Contains("not before step 1 of quorum 6"));
}

TEST_CASE("a source that closes mid-transfer is replaced by the next", "[heal_transfer]") {
  const auto state = RandomState(2 * 1024 * 1024, 6);
  FakeSource half([&](int fd) {
    ReadRequest(fd);
    SendHeader(fd, ft::kHealState, state->size());
    WriteAll(fd, state->data(), state->size() / 2);
  });
  auto server = ServerOn127();
  server->Offer(7, 3, state);
  auto fetched = ft::FetchHealState({half.where(), Where(server->port())}, 7, 3, SmallChunks());
  REQUIRE(fetched.ok());
  CHECK(fetched->source == Where(server->port()));
  CHECK(fetched->state == *state);
}

TEST_CASE("a stalled source is left after stall_timeout for the next", "[heal_transfer]") {
  auto holding = ServerOn127();  // no offer: holds the request
  auto serving = ServerOn127();
  const auto state = RandomState(5000, 7);
  serving->Offer(2, 8, state);
  ft::FetchOptions options;
  options.stall_timeout = std::chrono::milliseconds(50);
  auto fetched = ft::FetchHealState({Where(holding->port()), Where(serving->port())}, 2, 8, options);
  REQUIRE(fetched.ok());
  CHECK(fetched->source == Where(serving->port()));
  CHECK(fetched->state == *state);
}

TEST_CASE("when no source serves, Unavailable names each one's failure", "[heal_transfer]") {
  auto wrong = ServerOn127();
  wrong->Offer(9, 1, RandomState(10, 8));
  FakeSource truncated([](int fd) {
    ReadRequest(fd);
    SendHeader(fd, ft::kHealState, 1000);
    WriteAll(fd, "abc", 3);
  });
  FakeSource garbage([](int fd) {
    ReadRequest(fd);
    WriteAll(fd, std::string(ft::kHealReplyBytes, 'z').data(), ft::kHealReplyBytes);
  });
  const std::string dead = DeadSource();
  const std::vector<std::string> sources{Where(wrong->port()), truncated.where(), garbage.where(), dead,
                                         "not-an-address"};
  auto fetched = ft::FetchHealState(sources, 8, 1, {});
  REQUIRE_FALSE(fetched.ok());
  CHECK(fetched.status().code() == Status::Code::kUnavailable);
  const std::string& message = fetched.status().message();
  CHECK_THAT(message, Catch::StartsWith("no healing source served the state before step 1 of quorum 8: "));
  CHECK_THAT(message,
             Catch::Contains(Where(wrong->port()) + ": this worker offers the state before step 1 of quorum 9"));
  CHECK_THAT(message, Catch::Contains(truncated.where() + ": it closed the connection after 3 of 1000 bytes"));
  CHECK_THAT(message, Catch::Contains(garbage.where() + ": its first bytes are not a ctrun heal reply"));
  CHECK_THAT(message, Catch::Contains(dead + ": cannot connect"));
  CHECK_THAT(message, Catch::Contains("not-an-address: healing source 'not-an-address' is not host:port"));
  CHECK(message.find('\n') == std::string::npos);
}

TEST_CASE("a source announcing more than max_bytes is refused before any allocation", "[heal_transfer]") {
  const uint64_t announced = GENERATE(1ull << 40, ~0ull);
  FakeSource huge([&](int fd) {
    ReadRequest(fd);
    SendHeader(fd, ft::kHealState, announced);
  });
  auto fetched = ft::FetchHealState({huge.where()}, 1, 1, {});
  REQUIRE_FALSE(fetched.ok());
  CHECK_THAT(fetched.status().message(),
             Catch::Contains("announces a state of " + std::to_string(announced) + " bytes, more than the limit of " +
                             std::to_string(8ull << 30)));
}

TEST_CASE("hostile requests are refused in one line and the server goes on", "[heal_transfer]") {
  auto server = ServerOn127();
  const auto state = RandomState(1000, 9);
  server->Offer(1, 1, state);
  const int version_or_bytes = GENERATE(0, 1);
  auto fd = ct::RingStartConnect("127.0.0.1", server->port());
  REQUIRE(fd.ok());
  std::array<char, ft::kHealRequestBytes> hostile{};
  if (version_or_bytes == 0) {
    std::mt19937 gen(10);
    for (char& c : hostile) c = static_cast<char>(gen());
  } else {
    hostile = ft::EncodeHealRequest(ft::HealRequest{1, 1});
    hostile[8] = 0x7f;  // version 0x7f000001
  }
  WriteAll(*fd, hostile.data(), hostile.size());
  std::array<char, ft::kHealReplyBytes> header{};
  REQUIRE(ReadAll(*fd, header.data(), header.size()));
  auto reply = ft::DecodeHealReply(header, 0);
  REQUIRE(reply.ok());
  CHECK(reply->kind == ft::kHealRefused);
  std::string reason(reply->size, '\0');
  REQUIRE(ReadAll(*fd, reason.data(), reason.size()));
  CHECK_THAT(reason, Catch::StartsWith("refused: "));
  CHECK_THAT(reason, Catch::Contains(version_or_bytes == 0 ? "not a ctrun heal request" : "heal protocol version"));
  char byte = 0;
  CHECK_FALSE(ReadAll(*fd, &byte, 1));  // then closed
  ::close(*fd);
  auto fetched = ft::FetchHealState({Where(server->port())}, 1, 1, {});
  REQUIRE(fetched.ok());
  CHECK(fetched->state == *state);
}

TEST_CASE("beyond the connection bound a fetcher is told the source is busy", "[heal_transfer]") {
  auto server = ServerOn127();
  server->Offer(1, 1, RandomState(10, 11));
  std::vector<int> idle;
  for (std::size_t i = 0; i < ft::kHealMaxConnections; ++i) {
    auto fd = ct::RingStartConnect("127.0.0.1", server->port());
    REQUIRE(fd.ok());
    pollfd connected{*fd, POLLOUT, 0};
    REQUIRE(::poll(&connected, 1, -1) == 1);  // in the server's backlog before the fetcher
    idle.push_back(*fd);
  }
  auto fetched = ft::FetchHealState({Where(server->port())}, 1, 1, {});
  for (int fd : idle) ::close(fd);
  REQUIRE_FALSE(fetched.ok());
  CHECK_THAT(fetched.status().message(), Catch::Contains("busy: this worker serves 4 healing connections already"));
}

TEST_CASE("abort_fd gives up at once, before or during the wait", "[heal_transfer]") {
  auto server = ServerOn127();  // no offer: the request is held
  const int abort_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  REQUIRE(abort_fd >= 0);
  ft::FetchOptions options;
  options.abort_fd = abort_fd;
  options.stall_timeout = std::chrono::hours(1);
  const bool before = GENERATE(true, false);
  const uint64_t one = 1;
  if (before) REQUIRE(::write(abort_fd, &one, sizeof(one)) == sizeof(one));
  auto fetching = std::async(std::launch::async, [&] {
    return ft::FetchHealState({Where(server->port()), DeadSource()}, 1, 1, options);
  });
  if (!before) {
    AwaitWaiting(*server, 1);
    REQUIRE(::write(abort_fd, &one, sizeof(one)) == sizeof(one));
  }
  auto fetched = fetching.get();
  REQUIRE_FALSE(fetched.ok());
  CHECK(fetched.status().code() == Status::Code::kAborted);
  CHECK_THAT(fetched.status().message(), Catch::Contains("healing aborted while"));
  ::close(abort_fd);
}

TEST_CASE("bad arguments and hosts are refused", "[heal_transfer]") {
  CHECK(ft::FetchHealState({}, 1, 1, {}).status().code() == Status::Code::kInvalidArgument);
  ft::FetchOptions no_chunk;
  no_chunk.chunk_bytes = 0;
  CHECK(ft::FetchHealState({"127.0.0.1:1"}, 1, 1, no_chunk).status().code() == Status::Code::kInvalidArgument);
  auto named = ft::HealServer::Listen("localhost");
  REQUIRE_FALSE(named.ok());
  CHECK(named.status().code() == Status::Code::kInvalidArgument);
  CHECK_THAT(named.status().message(), Catch::StartsWith("heal server: "));
}
