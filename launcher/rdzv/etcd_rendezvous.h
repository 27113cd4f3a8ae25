// EtcdRendezvous: --rdzv-backend etcd-v3. The run's rendezvous machine
// (rendezvous/machine/machine.h) lives in ONE etcd key; every agent applies its own
// events through the pure machine and writes the result back with a
// compare-and-swap on the key's mod_revision (retrying on conflict), so all
// agents see one history. No server of ours: losing etcd members that leave
// a majority up does not fail the job.
//
// Keys, under /ctrun/rdzv/<run id>/:
//   state                                    the machine (rendezvous_state.proto)
//   alive/<incarnation>/<pid>/<local id>/<addr>  one per agent, bound to its etcd lease
// Liveness is the lease (TTL keep_alive_interval x keep_alive_max_attempt,
// renewed every keep_alive_interval): a node whose alive key exists is seen
// "now" at every step; when its key is deleted (lease expired or revoked),
// the first agent that sees the watch event applies Leave{signal} (the CAS
// makes it count once). Changes reach agents through an etcd Watch on the
// prefix, not by polling; the machine's deadlines (last call, join timeout)
// are a timer in each agent, the first to fire wins the CAS.
//
// Instants in the key are wall-clock time: hosts need synchronised clocks
// (NTP) to within a fraction of the timeouts.
//
// Thread model: the agent's io_context thread for every call and callback;
// etcd calls run on a thread of this object's own, results come back posted.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher/cli/launch_config.h"
#include "launcher/rdzv/remote_phase.h"
#include "launcher/rdzv/rendezvous_handler.h"
#include "rendezvous/persist/etcd_kv.h"
#include "rendezvous/machine/machine.h"

namespace ctrun::launcher {

struct EtcdRendezvousOptions {
  std::string run_id;
  rdzv::NodeId node;
  uint64_t incarnation = 0;
  rdzv::Params params;
  std::optional<int> hint_rank;
  int local_world_size = 1;
  std::string addr;  // published as MASTER_ADDR when this node is group rank 0
  StoreHosting store;  // with store.port, published as MASTER_PORT likewise
  Seconds join_timeout{600};
  Seconds close_timeout{30};
};

class EtcdRendezvous : public RendezvousHandler {
 public:
  // `io` must outlive this object.
  EtcdRendezvous(boost::asio::io_context& io, EtcdRendezvousOptions options, std::unique_ptr<rdzv::EtcdKv> kv);
  ~EtcdRendezvous() override;

  void NextRound(std::function<void(Result<Round>)> done) override;
  void OnChange(ChangeCallback cb) override { on_change_ = std::move(cb); }
  void Shutdown(ShutdownReason reason, std::function<void()> done) override;
  void SetUnhealthyReport(const std::string& report) override { unhealthy_report_ = report; }

 private:
  std::string unhealthy_report_;  // Shutdown(kUnhealthy)'s Leave carries it
  using Phase = RemotePhase;
  struct Seen {
    rdzv::RendezvousMachine machine;
    int64_t revision = 0;
    std::vector<rdzv::Decision> decisions;  // of this agent's own step, if any
  };

  // On the etcd thread.
  Result<Seen> Apply(const rdzv::Event& event);
  Result<Seen> Read();
  Status Register();

  // On the agent's thread.
  void RunOnEtcd(std::function<void()> fn);
  void Post(std::function<void()> fn);
  void Step(rdzv::Event event);
  void OnSeen(Result<Seen> seen);
  void Evaluate();
  void FinishJoin(Result<Round> result);
  void ArmKeepAlive();

  boost::asio::io_context& io_;
  EtcdRendezvousOptions options_;
  std::unique_ptr<rdzv::EtcdKv> kv_;
  std::shared_ptr<bool> alive_;
  const std::weak_ptr<bool> alive_weak_;  // read by the etcd thread; alive_ is reset on destruction
  std::string prefix_, state_key_, alive_key_;
  int64_t lease_ = 0;  // etcd thread only
  boost::asio::io_context etcd_io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> etcd_work_;
  std::thread etcd_thread_;

  boost::asio::steady_timer join_timer_;
  boost::asio::steady_timer deadline_timer_;
  boost::asio::steady_timer keep_alive_timer_;
  boost::asio::steady_timer close_timer_;
  Phase phase_ = Phase::kIdle;
  bool registered_ = false;
  bool closed_ = false;
  uint64_t round_ = 0;
  int64_t last_revision_ = 0;
  std::optional<rdzv::RendezvousMachine> machine_;
  std::function<void(Result<Round>)> pending_;
  std::function<void()> shutdown_done_;
  ChangeCallback on_change_;
};

// --rdzv-backend etcd-v3: connects to the etcd cluster through the member
// at `endpoint` ("host:port" or "[v6]:port"; the other members are found
// through it) and builds the handler. Unavailable when etcd cannot be
// reached; otherwise as EtcdSupport.
Result<std::unique_ptr<RendezvousHandler>> MakeEtcdRendezvous(boost::asio::io_context& io,
                                                              const std::string& endpoint,
                                                              EtcdRendezvousOptions options);

// OK when this ctrun was built with etcd support; InvalidArgument saying how
// to get it otherwise.
Status EtcdSupport();

}  // namespace ctrun::launcher
