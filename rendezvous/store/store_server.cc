#include "rendezvous/store/store_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <optional>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "rendezvous/net/listen_tcp.h"
#include "rendezvous/store/store_protocol.h"

namespace ctrun::rdzv {

namespace {

using boost::asio::ip::tcp;

// Refusals logged as warnings before the rest go to debug: a port scanner or
// a confused client must not flood the agent's log.
constexpr int kMaxRefusalsLogged = 20;

// An IPv4 or IPv6 address as written, or nullopt for a host name (or "").
std::optional<boost::asio::ip::address> NumericAddress(const std::string& host) {
  boost::system::error_code ec;
  boost::asio::ip::address a = boost::asio::ip::make_address(host, ec);
  if (ec) return std::nullopt;
  return a;
}

}  // namespace

// Reads go straight into the parser's buffer, `read_size` bytes at a time:
// small at first (thousands of idle connections cost little), doubled
// whenever a read fills it (a 64 KB value takes a few reads, once).
constexpr size_t kFirstReadSize = 4096;
constexpr size_t kMaxReadSize = 64 << 10;
constexpr size_t kMaxKeptValueBytes = 256 << 10;
// GET replies of at least this many bytes are written from the table.
constexpr size_t kDirectReplyBytes = 4096;
// Buffers (the reply being built, a client's queue) bigger than this are
// given back once empty, so that one large reply does not stay held.
constexpr size_t kKeepBufferBytes = 1 << 20;
// Replies built up to this size go out before the next request is served.
constexpr size_t kSendChunkBytes = 64 << 10;
// A request holds more keys than this only for a big MULTI_*: its vectors
// are given back after it.
constexpr size_t kMaxKeptKeys = 1024;

void ShrinkIfLarge(std::string& s) {
  if (s.empty() && s.capacity() > kKeepBufferBytes) std::string().swap(s);
}

struct StoreServer::Session {
  Session(tcp::socket socket, StoreClientId id) : id(id), socket(std::move(socket)) {}
  StoreClientId id;
  tcp::socket socket;
  std::string peer;
  std::string address;  // the peer's address without its port: the per-address count's key
  StoreParser parser;
  StoreRequest req;  // every request of the connection is decoded into it
  size_t read_size = kFirstReadSize;
  std::string out;      // being written
  std::string pending;  // queued behind `out`
  bool writing = false;
  bool closed = false;
  bool reading = false;  // a read is outstanding
  bool held = false;     // over the unsent limit: serving resumes when the replies drain
  bool posted = false;   // the turn's budget ran out: serving goes on in a posted handler
  size_t unsent() const { return out.size() + pending.size(); }
};

StoreServer::StoreServer(boost::asio::io_context& io)
    : io_(io), acceptor_(io),
      accepting_(acceptor_, "the workers' store", [this](tcp::socket socket) { Adopt(std::move(socket), {}); }) {}

StoreServer::~StoreServer() {
  boost::system::error_code ignored;
  accepting_.Stop();
  acceptor_.close(ignored);
  for (auto& [id, s] : sessions_) {
    s->closed = true;
    s->socket.close(ignored);
  }
}

Status StoreServer::Listen(const std::string& host, int port) {
  const std::string where = (host.empty() ? std::string("port ") : host + ":") + std::to_string(port);
  ListenAddress at{std::nullopt, static_cast<unsigned short>(port)};
  if (const std::optional<boost::asio::ip::address> numeric = NumericAddress(host)) {
    // An address needs no resolver (getaddrinfo asks the kernel for the
    // host's interfaces first: a netlink round trip in every launch).
    at.address = *numeric;
  } else if (!host.empty()) {
    boost::system::error_code ec;
    tcp::resolver resolver(io_);
    const tcp::resolver::results_type found = resolver.resolve(host, std::to_string(port), ec);
    if (ec || found.empty()) {
      return Status::InvalidArgument("cannot host the workers' store on " + where + ": '" + host +
                                     "' does not resolve (" + ec.message() +
                                     "); pass an address of this host as --local-addr");
    }
    at.address = found.begin()->endpoint().address();
  }
  const Listening listening = ListenTcp(acceptor_, at);
  if (listening.error == boost::asio::error::address_in_use) {
    return Status::Unavailable("cannot host the workers' store on " + where + ": " + listening.error.message() +
                               " (another process holds it: pick another --master-port, or drop it)");
  }
  if (listening.error) {
    return Status::IOError("cannot host the workers' store on " + where + ": " + listening.error.message());
  }
  port_ = listening.port;
  accepting_.Start();
  return Status::Ok();
}

void StoreServer::Adopt(tcp::socket socket, std::string_view first) {
  boost::system::error_code ignored;
  const tcp::endpoint peer = socket.remote_endpoint(ignored);
  boost::asio::ip::address addr = peer.address();
  if (addr.is_v6() && addr.to_v6().is_v4_mapped()) {
    addr = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, addr.to_v6());
  }
  const std::string address = addr.to_string();
  if (!AdmitConnection(address)) {
    socket.close(ignored);
    return;
  }
  auto s = std::make_shared<Session>(std::move(socket), next_id_++);
  SetCloexec(s->socket.native_handle());
  s->socket.set_option(tcp::no_delay(true), ignored);
  s->socket.non_blocking(true, ignored);  // Send writes at once where the socket takes it
  s->address = address;
  s->peer = addr.is_v6() ? "[" + address + "]:" + std::to_string(peer.port())
                         : address + ":" + std::to_string(peer.port());
  ++per_address_[address];
  sessions_.emplace(s->id, s);
  s->parser.Feed(first.data(), first.size());
  Serve(s);
}

bool StoreServer::AdmitConnection(const std::string& addr) {
  const auto it = per_address_.find(addr);
  const size_t from_addr = it == per_address_.end() ? 0 : it->second;
  const bool over_total = sessions_.size() >= max_connections_;
  if (!over_total && from_addr < max_per_address_) return true;
  ++connections_refused_;
  ++refusals_logged_;
  const auto level = refusals_logged_ <= kMaxRefusalsLogged ? spdlog::level::warn : spdlog::level::debug;
  if (over_total) {
    spdlog::log(level, "store: refused a connection from {}: {} connections open, the store's limit; closed it",
                addr, sessions_.size());
  } else {
    spdlog::log(level,
                "store: refused a connection from {}: {} connections open from that address, the limit per "
                "address; closed it",
                addr, from_addr);
  }
  return false;
}

void StoreServer::Forget(Session& s) {
  if (auto it = per_address_.find(s.address); it != per_address_.end() && --it->second == 0) {
    per_address_.erase(it);
  }
}

size_t StoreServer::UnsentLimit() const {
  return std::max(kMinUnsentLimitBytes, 2 * state_.largest_value());
}

void StoreServer::Serve(const std::shared_ptr<Session>& s) {
  if (!Consume(s)) return;
  if (s->held || s->posted || s->reading) return;
  Read(s);
}

void StoreServer::Read(const std::shared_ptr<Session>& s) {
  s->reading = true;
  char* room = s->parser.Space(s->read_size);
  s->socket.async_read_some(boost::asio::buffer(room, s->parser.space()),
                            [this, s](const boost::system::error_code& ec, size_t n) {
                              OnRead(s, ec, n);
                            });
}

void StoreServer::OnRead(const std::shared_ptr<Session>& s, const boost::system::error_code& ec,
                         size_t n) {
  s->reading = false;
  if (s->closed) return;
  if (ec) {
    OnPeerClosed(s);
    return;
  }
  if (n == s->parser.space() && s->read_size < kMaxReadSize) s->read_size *= 2;
  s->parser.Commit(n);
  Serve(s);
}

bool StoreServer::Consume(const std::shared_ptr<Session>& s) {
  reply_.clear();
  const Status st = ServeRequests(s, reply_);
  if (st.ok() && !reply_.empty()) Send(s, reply_);
  reply_.clear();
  ShrinkIfLarge(reply_);
  if (!st.ok()) {
    Refuse(s, st);
    return false;
  }
  return !s->closed;
}

void StoreServer::Resume(const std::shared_ptr<Session>& s) {
  s->posted = false;
  if (s->closed) return;
  Serve(s);
}

void StoreServer::OnPeerClosed(const std::shared_ptr<Session>& s) {
  if (s->parser.buffered() > 0) {
    Refuse(s, Status::InvalidArgument("the connection closed inside a request (" +
                                      std::to_string(s->parser.buffered()) +
                                      " bytes of it arrived)"));
  } else {
    Close(*s);
  }
}

Status StoreServer::ServeRequests(const std::shared_ptr<Session>& s, std::string& reply) {
  turn_sent_ = 0;
  size_t served = 0;
  for (;;) {
    if (s->closed) return Status::Ok();
    if (s->unsent() + reply.size() > UnsentLimit()) {
      // The client reads its replies slower than it asks: stop serving it
      // (and reading from it) until they drain (Flush).
      s->held = true;
      return Status::Ok();
    }
    if (served >= kMaxRequestsPerTurn || turn_sent_ + reply.size() >= kMaxReplyBytesPerTurn) {
      // Other connections (other runs' stores, on ctrund) get their turn
      // before this one goes on.
      s->posted = true;
      boost::asio::post(io_, [this, s] { Resume(s); });
      return Status::Ok();
    }
    Result<bool> got = s->parser.Next(s->req);
    if (!got.ok()) return got.status();
    if (!*got) return Status::Ok();
    ++served;
    Status st = Apply(s, s->req, reply);
    // The request keeps the memory of values it wrote (StoreState::Write
    // swaps the old ones in) for the next; not beyond a bound.
    for (std::string& v : s->req.values) {
      if (v.capacity() > kMaxKeptValueBytes) std::string().swap(v);
    }
    if (s->req.keys.capacity() > kMaxKeptKeys) std::vector<std::string>().swap(s->req.keys);
    if (s->req.values.capacity() > kMaxKeptKeys) std::vector<std::string>().swap(s->req.values);
    if (!st.ok()) return st;
    if (reply.size() >= kSendChunkBytes) {
      turn_sent_ += reply.size();
      Send(s, reply);
      reply.clear();
      ShrinkIfLarge(reply);
    }
  }
}

Status StoreServer::Apply(const std::shared_ptr<Session>& s, StoreRequest& req,
                          std::string& reply) {
  woken_.clear();
  DropAttemptPrefix(req);
  if (req.op == StoreOp::kGet) {
    // A big value goes out from the table in one gathered write, behind the
    // replies before it, instead of being copied into `reply` first.
    const std::string* value = state_.Find(req.keys[0]);
    if (value != nullptr && value->size() >= kDirectReplyBytes) {
      AppendStoreInt64(reply, static_cast<int64_t>(value->size()));
      turn_sent_ += reply.size() + value->size();
      Send(s, reply, *value);
      reply.clear();
      return Status::Ok();
    }
  }
  Status st = state_.Apply(s->id, std::move(req), reply, woken_);
  // Woken waiters hear of it even when the request itself is refused.
  for (StoreClientId id : woken_) {
    auto w = sessions_.find(id);
    if (w == sessions_.end()) continue;
    const char stop_waiting = static_cast<char>(kStoreStopWaiting);
    if (w->second == s) {
      reply.push_back(stop_waiting);
    } else {
      Send(w->second, std::string_view(&stop_waiting, 1));
    }
  }
  return st;
}

void StoreServer::Send(const std::shared_ptr<Session>& s, std::string_view bytes,
                       std::string_view more) {
  if (s->closed) return;
  if (!s->writing) {
    // Nothing queued: write now, one syscall, no copy, no completion to run
    // later; only what the socket does not take waits for async_write.
    boost::system::error_code ec;
    const std::array<boost::asio::const_buffer, 2> both = {
        boost::asio::buffer(bytes.data(), bytes.size()), boost::asio::buffer(more.data(), more.size())};
    size_t n = s->socket.write_some(both, ec);
    if (ec && ec != boost::asio::error::would_block && ec != boost::asio::error::try_again) {
      Close(*s);
      return;
    }
    if (ec) n = 0;
    const size_t first = std::min(n, bytes.size());
    bytes.remove_prefix(first);
    more.remove_prefix(n - first);
    if (bytes.empty() && more.empty()) return;
  }
  s->pending += bytes;
  s->pending += more;
  peak_unsent_ = std::max(peak_unsent_, s->unsent());
  if (!s->writing) Flush(s);
}

void StoreServer::Flush(const std::shared_ptr<Session>& s) {
  s->out.swap(s->pending);
  s->pending.clear();
  ShrinkIfLarge(s->pending);
  s->writing = true;
  boost::asio::async_write(s->socket, boost::asio::buffer(s->out),
                           [this, s](const boost::system::error_code& ec, size_t) {
                             s->writing = false;
                             s->out.clear();
                             ShrinkIfLarge(s->out);
                             if (s->closed) return;
                             if (ec) {
                               Close(*s);
                               return;
                             }
                             if (!s->pending.empty()) Flush(s);
                             if (s->held && s->unsent() <= UnsentLimit()) {
                               s->held = false;
                               Serve(s);
                             }
                           });
}

void StoreServer::Refuse(const std::shared_ptr<Session>& s, const Status& why) {
  ++refusals_logged_;
  if (refusals_logged_ <= kMaxRefusalsLogged) {
    spdlog::warn("store: refused a request from {}: {}; closed the connection{}", s->peer,
                 why.message(),
                 refusals_logged_ == kMaxRefusalsLogged ? " (further refusals are logged at debug level)" : "");
  } else {
    spdlog::debug("store: refused a request from {}: {}; closed the connection", s->peer,
                  why.message());
  }
  Close(*s);
}

void StoreServer::Close(Session& s) {
  if (s.closed) return;
  s.closed = true;
  state_.Disconnect(s.id);
  boost::system::error_code ignored;
  s.socket.close(ignored);
  Forget(s);
  sessions_.erase(s.id);
}

void StoreServer::Clear() {
  state_.Clear();
  boost::system::error_code ignored;
  for (auto& [id, s] : sessions_) {
    s->closed = true;
    s->socket.close(ignored);
  }
  sessions_.clear();
  per_address_.clear();
}

}  // namespace ctrun::rdzv
