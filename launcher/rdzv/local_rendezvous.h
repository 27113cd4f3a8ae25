// LocalRendezvous: the rendezvous of a single-node job (--standalone, or
// --nnodes 1). Every round is this node alone; the workers' store is at
// `master_addr`, hosted by the agent (use_agent_store, on its store's port)
// or by worker RANK 0 (on a free port, fresh each round).
#pragma once

#include <boost/asio/io_context.hpp>
#include <string>

#include "launcher/rdzv/rendezvous_handler.h"

namespace ctrun::launcher {

class LocalRendezvous : public RendezvousHandler {
 public:
  // `fixed_port` > 0 pins MASTER_PORT (an explicit --master-port, or the
  // agent store's port); 0 picks a free port each round. `use_agent_store`
  // is published as Round::use_agent_store. `io` must outlive this object.
  LocalRendezvous(boost::asio::io_context& io, std::string run_id, int nproc,
                  std::string master_addr, int fixed_port, bool use_agent_store);

  void NextRound(std::function<void(Result<Round>)> done) override;
  void OnChange(ChangeCallback) override {}
  void Shutdown(ShutdownReason, std::function<void()> done) override;

 private:
  boost::asio::io_context& io_;
  std::string run_id_;
  int nproc_;
  std::string master_addr_;
  int fixed_port_;
  bool use_agent_store_;
  int round_ = 0;
};

}  // namespace ctrun::launcher
