// The rendezvous port shared with the workers' c10d store (port_mux.h,
// store_routing.h), over real sockets on 127.0.0.1: a TCPStore client (the
// torch 1.13 dialect, spoken by hand) and gRPC clients on one port. Every
// read has a deadline; nothing sleeps.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "rendezvous/grpc/net/port_mux.h"
#include "rendezvous/grpc/server/server.h"
#include "tests/rendezvous/grpc/rdzv_test_client.h"

namespace ctrun::rdzv {
namespace {

using testing::JoinStreamReader;
using testing::MakeJoin;
using testing::MakeLeave;
using testing::TestClient;

// A blocking TCPStore client of the torch 1.13 dialect (SET=0, GET=2,
// CHECK=4) with a 10 s receive deadline.
class StoreConn {
 public:
  explicit StoreConn(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    REQUIRE(fd_ >= 0);
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  }
  ~StoreConn() { ::close(fd_); }

  void Send(const std::string& bytes) { REQUIRE(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size())); }
  void Set(const std::string& key, const std::string& value) { Send(Type(0) + Str(key) + Str(value)); }
  void SendGet(const std::string& key) { Send(Type(2) + Str(key)); }
  std::string Get(const std::string& key) {
    SendGet(key);
    uint64_t n = 0;
    REQUIRE(Read(&n, sizeof(n)));
    std::string v(n, '\0');
    REQUIRE(Read(v.data(), n));
    return v;
  }
  // CHECK of one key: true when it exists.
  bool Check(const std::string& key) {
    const uint64_t one = 1;
    Send(Type(4) + std::string(reinterpret_cast<const char*>(&one), sizeof(one)) + Str(key));
    uint8_t ready = 9;
    REQUIRE(Read(&ready, 1));
    return ready == 0;
  }
  // True when the server closed the connection (an end of stream, or a reset
  // when it closed with bytes of ours unread), rather than the deadline passing.
  bool ClosedByServer() {
    char c;
    const ssize_t got = ::recv(fd_, &c, 1, 0);
    return got == 0 || (got < 0 && errno == ECONNRESET);
  }

 private:
  static std::string Type(uint8_t t) { return std::string(1, static_cast<char>(t)); }
  static std::string Str(const std::string& s) {
    const uint64_t n = s.size();
    return std::string(reinterpret_cast<const char*>(&n), sizeof(n)) + s;
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
  int fd_;
};

Params MuxRunParams(int min_nodes, int max_nodes) {
  Params p;
  p.min_nodes = min_nodes;
  p.max_nodes = max_nodes;
  p.last_call_timeout = std::chrono::milliseconds(100);
  return p;
}

std::unique_ptr<RendezvousServer> StartMuxServer(ServerOptions options) {
  options.listen_address = "127.0.0.1:0";
  Result<std::unique_ptr<RendezvousServer>> server = RendezvousServer::Start(options);
  REQUIRE(server.ok());
  return std::move(server).value();
}

std::unique_ptr<RendezvousServer> FixedMuxServer(int min_nodes, int max_nodes, bool serve_stores = true) {
  ServerOptions options;
  options.runs.push_back({"job", MuxRunParams(min_nodes, max_nodes)});
  options.serve_stores = serve_stores;
  return StartMuxServer(options);
}

v1::RoundComplete NextRound(JoinStreamReader& stream) {
  std::optional<v1::Update> u = stream.NextOf(v1::Update::kRoundComplete);
  REQUIRE(u.has_value());
  return u->round_complete();
}

TEST_CASE("a round is told its store is on the rendezvous port, and TCPStore clients there share the run's table") {
  auto server = FixedMuxServer(1, 1);
  TestClient client(server->port());
  auto a = client.Join(MakeJoin("job", "node1", 11, 1, 1));
  CHECK(NextRound(*a).store_on_rendezvous_port());

  StoreConn writer(server->port());
  writer.Set("k", "v");
  CHECK(writer.Get("k") == "v");
  StoreConn reader(server->port());
  CHECK(reader.Get("k") == "v");
  // gRPC still answers on the same port with store clients connected.
  v1::StateReply state;
  CHECK(client.GetState(testing::MakeState("job"), &state).ok());
}

TEST_CASE("each round starts with an empty store, the last round's store connections are closed") {
  auto server = FixedMuxServer(1, 2);
  TestClient client(server->port());
  const v1::JoinRequest join_a = MakeJoin("job", "node1", 11, 1, 2);
  const v1::JoinRequest join_b = MakeJoin("job", "node2", 22, 1, 2);
  auto a = client.Join(join_a);
  auto b = client.Join(join_b);
  REQUIRE(NextRound(*a).store_on_rendezvous_port());
  REQUIRE(NextRound(*b).store_on_rendezvous_port());
  StoreConn old(server->port());
  old.Set("k", "round 0");
  CHECK(old.Check("k"));

  // node2 exits (SIGNAL: it will not join again), so node1 alone is round 1
  // at once; a FAILURE leave would make the round wait for node2 to rejoin.
  REQUIRE(client.Leave(MakeLeave(join_b, v1::LeaveRequest::SIGNAL)).ok());
  REQUIRE(a->NextOf(v1::Update::kRestartRequested));
  auto again = client.Join(join_a);
  const v1::RoundComplete next = NextRound(*again);
  CHECK(next.round() == 1);
  CHECK(next.store_on_rendezvous_port());
  CHECK(old.ClosedByServer());
  StoreConn fresh(server->port());
  CHECK_FALSE(fresh.Check("k"));
}

TEST_CASE("a run whose members share an address with another running run is not offered the port") {
  ServerOptions options;
  options.mode = RunRegistry::Mode::kAutoCreate;
  auto server = StartMuxServer(options);
  TestClient client(server->port());
  auto a = client.Join(MakeJoin("run-a", "node1", 11, 1, 1));
  CHECK(NextRound(*a).store_on_rendezvous_port());
  auto b = client.Join(MakeJoin("run-b", "node1", 12, 1, 1));  // also from 127.0.0.1
  CHECK_FALSE(NextRound(*b).store_on_rendezvous_port());

  // run-a ended: its address is free, and run-b's next round gets the port.
  REQUIRE(client.Leave(MakeLeave(MakeJoin("run-a", "node1", 11, 1, 1), v1::LeaveRequest::NORMAL_EXIT)).ok());
  REQUIRE(client.Leave(MakeLeave(MakeJoin("run-b", "node1", 12, 1, 1), v1::LeaveRequest::FAILURE)).ok());
  auto b2 = client.Join(MakeJoin("run-b", "node1", 12, 1, 1));
  CHECK(NextRound(*b2).store_on_rendezvous_port());
}

TEST_CASE("a store connection that no running round holds is closed") {
  auto server = FixedMuxServer(1, 1);
  StoreConn early(server->port());  // before any round
  early.SendGet("k");
  CHECK(early.ClosedByServer());
}

TEST_CASE("with serve_stores off, no round is offered the port and store connections are closed") {
  auto server = FixedMuxServer(1, 1, /*serve_stores=*/false);
  TestClient client(server->port());
  auto a = client.Join(MakeJoin("job", "node1", 11, 1, 1));
  CHECK_FALSE(NextRound(*a).store_on_rendezvous_port());
  StoreConn conn(server->port());
  conn.Set("k", "v");
  CHECK(conn.ClosedByServer());
}

TEST_CASE("a connection that speaks neither gRPC nor the store protocol is closed, the port goes on serving") {
  auto server = FixedMuxServer(1, 1);
  {
    StoreConn http(server->port());
    http.Send("GET /metrics HTTP/1.1\r\n\r\n");
    CHECK(http.ClosedByServer());
  }
  TestClient client(server->port());
  auto a = client.Join(MakeJoin("job", "node1", 11, 1, 1));
  CHECK(NextRound(*a).store_on_rendezvous_port());
}

TEST_CASE("a connection that says nothing within the sniff deadline is closed; one that speaks is handed on") {
  using std::chrono::milliseconds;
  {
    Result<std::unique_ptr<PortMux>> plain = PortMux::Bind(HostPort{"127.0.0.1", 0});
    REQUIRE(plain.ok());
    CHECK((*plain)->sniff_deadline() == PortMux::kDefaultSniffDeadline);
    CHECK(PortMux::kDefaultSniffDeadline == milliseconds(10'000));
  }
  Result<std::unique_ptr<PortMux>> bound = PortMux::Bind(HostPort{"127.0.0.1", 0}, milliseconds(250));
  REQUIRE(bound.ok());
  std::unique_ptr<PortMux> mux = std::move(bound).value();
  CHECK(mux->sniff_deadline() == milliseconds(250));
  mux->set_sniff_deadline(milliseconds(100));
  std::vector<boost::asio::ip::tcp::socket> handed;  // the mux's thread only, until Stop
  std::promise<std::string> first;
  mux->Start(nullptr, [&](boost::asio::ip::tcp::socket socket, std::string bytes) {
    handed.push_back(std::move(socket));
    first.set_value(bytes);
  });
  // Silent: closed by the deadline (the client's own receive deadline is 10 s).
  StoreConn silent(mux->port());
  CHECK(silent.ClosedByServer());
  // One byte of a TCPStore request tells: handed to the store, which keeps it.
  StoreConn store(mux->port());
  store.Send(std::string(1, '\x06'));
  std::future<std::string> got = first.get_future();
  REQUIRE(got.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(got.get() == std::string(1, '\x06'));
  mux->Stop();
  handed.clear();
}

TEST_CASE("connections over the limit of those not yet sniffed are closed at accept; a slot frees as one speaks") {
  Result<std::unique_ptr<PortMux>> bound = PortMux::Bind(HostPort{"127.0.0.1", 0});
  REQUIRE(bound.ok());
  std::unique_ptr<PortMux> mux = std::move(bound).value();
  CHECK(PortMux::kMaxSniffing == 4096);
  mux->set_max_sniffing(2);
  std::vector<boost::asio::ip::tcp::socket> handed;  // the mux's thread only, until Stop
  std::promise<void> two_handed, three_handed;
  mux->Start(nullptr, [&](boost::asio::ip::tcp::socket socket, std::string) {
    handed.push_back(std::move(socket));
    if (handed.size() == 2) two_handed.set_value();
    if (handed.size() == 3) three_handed.set_value();
  });
  StoreConn silent1(mux->port());
  StoreConn silent2(mux->port());
  StoreConn over(mux->port());  // a third while two say nothing
  CHECK(over.ClosedByServer());
  // The silent ones were not dropped: each speaks now and is handed on.
  silent1.Send(std::string(1, '\x06'));
  silent2.Send(std::string(1, '\x06'));
  REQUIRE(two_handed.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  // Their slots are free again: a new one gets in and is handed on.
  StoreConn later(mux->port());
  later.Send(std::string(1, '\x06'));
  REQUIRE(three_handed.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  mux->Stop();
  CHECK(mux->refused() == 1);
  CHECK(handed.size() == 3);
  handed.clear();
}

}  // namespace
}  // namespace ctrun::rdzv
