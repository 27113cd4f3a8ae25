// RunStores: the workers' c10d stores on the listen port (ServerOptions::
// serve_stores, port_mux.h): which run's running round holds the port
// (StoreRouting, by its members' addresses), a fresh StoreServer per round,
// and the store connections the mux hands over, routed by their source
// address.
//
// Locking and threads: the routing is guarded by the server's mutex `mu`
// (Grant, Release, Holds require it; OnConnection takes it); the stores
// live on the mux's thread (io()), where all their work is posted.
// Destroyed after the gRPC server and the mux's thread stopped, before the
// mux.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rendezvous/grpc/net/port_mux.h"
#include "rendezvous/grpc/server/checked_mutex.h"
#include "rendezvous/grpc/server/join_stream.h"
#include "rendezvous/grpc/server/store_routing.h"
#include "rendezvous/machine/machine.h"
#include "rendezvous/store/store_server.h"

namespace ctrun::rdzv {

class RunStores {
 public:
  // `serve`: ServerOptions::serve_stores.
  RunStores(CheckedMutex& mu, bool serve) : mu_(mu), serve_(serve) {}
  RunStores(const RunStores&) = delete;
  RunStores& operator=(const RunStores&) = delete;

  // The mux whose port the stores share; before it starts. Without one (no
  // Listen yet), no round is granted the port.
  void Attach(PortMux* mux) { mux_ = mux; }

  // A round of `run_id` completed with `members`, each reached on the
  // stream `stream_of` returns (null if none): grants it the port when its
  // members' addresses are not another running run's, and empties the run's
  // store before any worker of the round can connect. Returns whether the
  // round got the port. Requires mu.
  bool Grant(const std::string& run_id, const std::vector<Member>& members,
             const std::function<JoinStream*(const NodeId&)>& stream_of, Outbox& out);
  // The run's round ended: new store connections no longer reach it.
  // `drained`: no node is left, so its store is dropped too. Requires mu.
  void Release(const std::string& run_id, bool drained);
  // Whether the run's running round holds the port. Requires mu.
  bool Holds(const std::string& run_id) const { return routing_.Holds(run_id); }

  // A store connection the mux accepted (mux thread): to the store of the
  // run that holds its address, else closed.
  void OnConnection(boost::asio::ip::tcp::socket socket, std::string first);

 private:
  CheckedMutex& mu_;
  const bool serve_;
  PortMux* mux_ = nullptr;
  StoreRouting routing_;                                        // guarded by mu_
  std::map<std::string, std::unique_ptr<StoreServer>> stores_;  // mux thread only
  int unrouted_logged_ = 0;                                     // mux thread only
};

}  // namespace ctrun::rdzv
