// StoreServer over real sockets on 127.0.0.1, its loop on a thread of the
// test: a client that pipelines more replies than it reads is held, not
// buffered without bound, and gets every reply, in order, once it reads; a
// turn's budget running out loses no request; a MULTI_GET over the cap closes
// only its own connection; connections over the per-address or the total
// limit are closed at once, the others served. Every read has a deadline;
// nothing sleeps.
#include "rendezvous/store/store_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <future>
#include <string>
#include <thread>

namespace ctrun::rdzv {
namespace {

std::string Le64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), sizeof(v)); }
std::string ServerStr(const std::string& s) { return Le64(s.size()) + s; }
// torch 2.x dialect: VALIDATE opens the connection.
std::string ServerValidate() {
  const uint32_t magic = kStoreValidateMagic;
  return std::string(1, '\0') + std::string(reinterpret_cast<const char*>(&magic), sizeof(magic));
}
std::string Set(const std::string& k, const std::string& v) {
  return std::string(1, '\1') + ServerStr(k) + ServerStr(v);
}
std::string Get(const std::string& k) { return std::string(1, '\3') + ServerStr(k); }
std::string MultiGet(const std::string& k, uint64_t n) {
  std::string out(1, '\12');
  out += Le64(n);
  for (uint64_t i = 0; i < n; ++i) out += ServerStr(k);
  return out;
}

// The server's io_context on a thread; Call runs a function there and
// returns its result.
struct Loop {
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  std::unique_ptr<StoreServer> server;
  std::thread thread;
  Loop() : server(std::make_unique<StoreServer>(io)) {
    REQUIRE(server->Listen("127.0.0.1", 0).ok());
    thread = std::thread([this] { io.run(); });
  }
  template <typename F>
  auto Call(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto done = task.get_future();
    boost::asio::post(io, [&task] { task(); });
    return done.get();
  }
  ~Loop() {
    Call([this] {
      server.reset();
      return 0;
    });
    work.reset();
    io.stop();
    thread.join();
  }
};

// A blocking client with a 20 s receive deadline.
class Conn {
 public:
  // `from`: the loopback address to connect from (all of 127/8 is this host).
  explicit Conn(int port, const char* from = nullptr) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    REQUIRE(fd_ >= 0);
    timeval tv{20, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (from != nullptr) {
      sockaddr_in local{};
      local.sin_family = AF_INET;
      REQUIRE(::inet_pton(AF_INET, from, &local.sin_addr) == 1);
      REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) == 0);
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  }
  ~Conn() { ::close(fd_); }
  void Send(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      REQUIRE(n > 0);
      off += static_cast<size_t>(n);
    }
  }
  bool Read(void* out, size_t n) {
    auto* p = static_cast<char*>(out);
    while (n > 0) {
      const ssize_t got = ::recv(fd_, p, n, 0);
      if (got <= 0) return false;
      p += got;
      n -= static_cast<size_t>(got);
    }
    return true;
  }
  std::string ReadValue() {
    uint64_t n = 0;
    REQUIRE(Read(&n, sizeof(n)));
    std::string v(n, '\0');
    REQUIRE(Read(v.data(), n));
    return v;
  }
  bool ClosedByServer() {
    char c;
    const ssize_t got = ::recv(fd_, &c, 1, 0);
    return got == 0 || (got < 0 && errno == ECONNRESET);
  }

 private:
  int fd_;
};

TEST_CASE("a client that asks for more than it reads is held, then gets every reply in order") {
  Loop loop;
  const int port = loop.Call([&] { return loop.server->port(); });
  const std::string big(1 << 20, 'b');
  Conn c(port);
  c.Send(ServerValidate() + Set("big", big) + Set("small", "s") + Get("small"));
  REQUIRE(c.ReadValue() == "s");  // both SETs were applied
  CHECK(loop.Call([&] { return loop.server->UnsentLimit(); }) == (2u << 20));
  // 256 GETs of 1 MiB, alternating with small ones, in one write; nothing
  // read until all are sent. Without back-pressure the server would queue
  // 256 MiB; held, it queues at most its limit plus one reply.
  std::string asks;
  for (int i = 0; i < 256; ++i) asks += Get("big") + Get("small");
  c.Send(asks);
  for (int i = 0; i < 256; ++i) {
    REQUIRE(c.ReadValue() == big);
    REQUIRE(c.ReadValue() == "s");
  }
  // The connection goes on being served.
  c.Send(Get("small"));
  CHECK(c.ReadValue() == "s");
  // What the server queued stayed within its limit and one more reply (plus
  // the small replies served with it).
  CHECK(loop.Call([&] { return loop.server->peak_unsent(); }) <= (3u << 20) + (64u << 10));
}

TEST_CASE("more pipelined requests than one turn serves are all answered") {
  Loop loop;
  const int port = loop.Call([&] { return loop.server->port(); });
  Conn c(port);
  const size_t n = 3 * StoreServer::kMaxRequestsPerTurn + 7;
  std::string asks = ServerValidate() + Set("k", "v");
  for (size_t i = 0; i < n; ++i) asks += Get("k");
  c.Send(asks);
  for (size_t i = 0; i < n; ++i) REQUIRE(c.ReadValue() == "v");
}

TEST_CASE("a MULTI_GET over the cap closes its connection alone") {
  Loop loop;
  const int port = loop.Call([&] { return loop.server->port(); });
  Conn other(port);
  other.Send(ServerValidate() + Set("v", std::string(32 << 10, 'x')));
  Conn attacker(port);
  attacker.Send(ServerValidate() + MultiGet("v", 4096));  // a 128 MiB reply
  CHECK(attacker.ClosedByServer());
  other.Send(MultiGet("v", 2));
  CHECK(other.ReadValue() == std::string(32 << 10, 'x'));
  CHECK(other.ReadValue() == std::string(32 << 10, 'x'));
}

// A connection that works: (VALIDATE first,) then a SET and a GET answered.
bool Works(Conn& c, const std::string& key, bool first = true) {
  c.Send((first ? ServerValidate() : std::string()) + Set(key, "v") + Get(key));
  return c.ReadValue() == "v";
}

TEST_CASE("connections over the per-address or the total limit are closed; the others are served") {
  Loop loop;
  loop.Call([&] {
    loop.server->set_connection_limits(2, 3);
    return 0;
  });
  const int port = loop.server->port();
  auto a1 = std::make_unique<Conn>(port, "127.0.0.1");
  Conn a2(port, "127.0.0.1");
  REQUIRE(Works(*a1, "a1"));
  REQUIRE(Works(a2, "a2"));
  Conn a3(port, "127.0.0.1");  // a third from one address
  CHECK(a3.ClosedByServer());
  Conn b1(port, "127.0.0.2");  // another address is still let in
  CHECK(Works(b1, "b1"));
  Conn c1(port, "127.0.0.3");  // over the total
  CHECK(c1.ClosedByServer());
  CHECK(loop.Call([&] { return loop.server->connections_refused(); }) == 2);
  CHECK(loop.Call([&] { return loop.server->connections(); }) == 3);

  // One of 127.0.0.1's goes: its place is free again once the server saw it go.
  a1.reset();
  for (int i = 0; i < 100000 && loop.Call([&] { return loop.server->connections(); }) != 2; ++i) {
    std::this_thread::yield();
  }
  REQUIRE(loop.Call([&] { return loop.server->connections(); }) == 2);
  Conn a4(port, "127.0.0.1");
  CHECK(Works(a4, "a4"));
  CHECK(Works(a2, "a2-again", false));
}

}  // namespace
}  // namespace ctrun::rdzv
