#include "rendezvous/grpc/server/run_stores.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <set>


namespace ctrun::rdzv {

namespace {

// Store connections that reach no run, logged as warnings before the rest
// go to debug.
constexpr int kMaxUnroutedLogged = 10;

std::string IpOf(const boost::asio::ip::tcp::socket& socket) {
  boost::system::error_code ec;
  boost::asio::ip::address addr = socket.remote_endpoint(ec).address();
  if (ec) return "";
  if (addr.is_v6() && addr.to_v6().is_v4_mapped()) {
    addr = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, addr.to_v6());
  }
  return addr.to_string();
}

}  // namespace

bool RunStores::Grant(const std::string& run_id, const std::vector<Member>& members,
                      const std::function<JoinStream*(const NodeId&)>& stream_of, Outbox& out) {
  mu_.AssertHeld("RunStores::Grant");
  if (!serve_ || !mux_) return false;
  std::set<std::string> ips;
  for (const Member& m : members) {
    const JoinStream* stream = stream_of(m.node);
    if (stream && !stream->peer_ip().empty()) ips.insert(stream->peer_ip());
  }
  const StoreGrant grant = routing_.Grant(run_id, ips);
  // Emptied before the RoundComplete that lets the round's workers start is
  // even queued: the mux thread runs this before any of their connections.
  boost::asio::post(mux_->io(), [this, run_id] {
    if (auto it = stores_.find(run_id); it != stores_.end()) it->second->Clear();
  });
  if (!grant.granted) {
    out.logs.push_back("rendezvous run '" + run_id + "': its workers' store is not served on this port: host " +
                       grant.conflict_ip + " also runs run '" + grant.holder +
                       "', and a store connection names no run; the agents host it on a port of their own");
  }
  return grant.granted;
}

void RunStores::Release(const std::string& run_id, bool drained) {
  mu_.AssertHeld("RunStores::Release");
  routing_.Release(run_id);
  if (drained && mux_) {
    boost::asio::post(mux_->io(), [this, run_id] { stores_.erase(run_id); });
  }
}

void RunStores::OnConnection(boost::asio::ip::tcp::socket socket, std::string first) {
  const std::string ip = IpOf(socket);
  std::optional<std::string> run;
  if (serve_ && !ip.empty()) {
    std::lock_guard<CheckedMutex> lock(mu_);
    run = routing_.Route(ip);
  }
  if (!run) {
    ++unrouted_logged_;
    const auto level = unrouted_logged_ <= kMaxUnroutedLogged ? spdlog::level::warn : spdlog::level::debug;
    const std::string from = ip.empty() ? "an unknown address" : ip;
    if (serve_) {
      spdlog::log(level,
                  "a c10d store connection from {} reached the rendezvous port, but no running round here has "
                  "a node at that address; closed it",
                  from);
    } else {
      spdlog::log(level,
                  "a c10d store connection from {} reached the rendezvous port, but this server does not "
                  "serve stores (--no-worker-stores); closed it",
                  from);
    }
    boost::system::error_code ignored;
    socket.close(ignored);
    return;
  }
  std::unique_ptr<StoreServer>& store = stores_[*run];
  if (!store) store = std::make_unique<StoreServer>(mux_->io());
  store->Adopt(std::move(socket), first);
}

}  // namespace ctrun::rdzv
