// StoreRouting: which run's c10d store a worker's connection to the
// rendezvous port belongs to. Pure: no sockets, no clock, no lock.
//
// TCPStore clients say nothing about their job: the only thing a store
// connection tells is its source address. A run holds the addresses of its
// members (as the server saw their Join streams come in) while one of its
// rounds runs, and a store connection from an address goes to the run that
// holds it. An address held by one run at a time keeps that sound: a round
// whose members share an address with another running run is not granted
// the port (its agents then serve the store on a port of their own, as
// before), and never gets connections that were meant for the other run.
//
// Copyable; not thread-safe (the server guards it with its lock).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>

namespace ctrun::rdzv {

struct StoreGrant {
  bool granted = false;
  // When not granted: an address of the round that `holder` holds.
  std::string conflict_ip;
  std::string holder;
};

class StoreRouting {
 public:
  // A round of `run_id` is complete, its members at `ips`. Drops the run's
  // earlier hold first; then, when no other run holds one of `ips`, the run
  // holds them all (granted). Otherwise it holds none.
  StoreGrant Grant(const std::string& run_id, const std::set<std::string>& ips);

  // The run's round ended (restart, close, every node gone): it holds no
  // address any more. Unknown runs are ignored.
  void Release(const std::string& run_id);

  // The run holding `ip`, or nullopt.
  std::optional<std::string> Route(const std::string& ip) const;

  // Whether `run_id` holds addresses now (its running round was granted).
  bool Holds(const std::string& run_id) const { return held_.count(run_id) > 0; }

 private:
  std::map<std::string, std::string> owner_;           // ip -> run
  std::map<std::string, std::set<std::string>> held_;  // run -> ips
};

}  // namespace ctrun::rdzv
