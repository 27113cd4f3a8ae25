#include "launcher/rdzv/local_rendezvous.h"

#include <boost/asio/post.hpp>

#include "launcher/net/free_port.h"

namespace ctrun::launcher {

LocalRendezvous::LocalRendezvous(boost::asio::io_context& io, std::string run_id, int nproc,
                                 std::string master_addr, int fixed_port,
                                 bool use_agent_store)
    : io_(io),
      run_id_(std::move(run_id)),
      nproc_(nproc),
      master_addr_(std::move(master_addr)),
      fixed_port_(fixed_port),
      use_agent_store_(use_agent_store) {}

void LocalRendezvous::NextRound(std::function<void(Result<Round>)> done) {
  Round r;
  r.round = round_++;
  r.group_rank = 0;
  r.local_world_sizes = {nproc_};
  r.master_addr = master_addr_;
  r.run_id = run_id_;
  r.use_agent_store = use_agent_store_;
  if (fixed_port_ > 0) {
    r.master_port = fixed_port_;
  } else {
    Result<int> port = FindFreePort();
    if (!port.ok()) {
      boost::asio::post(io_, [done, s = port.status()] { done(s); });
      return;
    }
    r.master_port = *port;
  }
  boost::asio::post(io_, [done, r] { done(r); });
}

void LocalRendezvous::Shutdown(ShutdownReason, std::function<void()> done) {
  boost::asio::post(io_, std::move(done));
}

}  // namespace ctrun::launcher
