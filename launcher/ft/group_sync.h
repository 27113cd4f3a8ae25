// FtGroupSync: one replica group's step as its agent sees it under
// --ft-replicas (docs/fault-tolerance.md): the `sync` lines of its local
// ranks gathered into the group's one call to the quorum server, and that
// call's answer cut back into one answer per rank.
//
// A node's part of its group's address (opaque to the server, carried in
// the quorum's members) says where each of its local ranks listens:
//   <host>|<ring_port_0>/<heal_port_0>,<ring_port_1>/<heal_port_1>,...
// with an IPv6 host in brackets. A group of several nodes
// (--ft-group-size) sends one part per node and the server joins them with
// ';' in the nodes' group-rank order, so the group's ranks are listed in
// order. Rank r of the quorum's group k connects its ring to rank r of
// group k+1 (mod the quorum's size), and heals from rank r of the groups at
// the quorum's max step.
//
// Pure: no I/O. One owner.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/ft_wire/agent_lines.h"
#include "base/ft_wire/worker_lines.h"
#include "base/result.h"
#include "rendezvous/machine/step_sync.h"

namespace ctrun::launcher {

// The most workers a node may run under --ft-replicas: its address must fit
// the quorum server's 1024 bytes.
inline constexpr int kFtMaxLocalRanks = 64;

class FtGroupSync {
 public:
  // `host`: the numeric address other groups reach this node at.
  FtGroupSync(std::string group, std::string host, int nproc);

  // One rank's line for this step. InvalidArgument naming the rank when it
  // is out of range or already gave its line this step.
  Status Add(const ft_wire::SyncLine& line);
  bool complete() const { return given_ == nproc_; }
  // The group's call, once complete(): its ballot is every rank's ok and-ed
  // (a rank with no ballot where another has one, or with another quorum or
  // step, votes no). InvalidArgument when the ranks' committed steps differ.
  Result<rdzv::SyncCall> Call() const;
  // Starts the next step (and forgets a step cut short by a failure).
  void Reset();

  const std::string& group() const { return group_; }

 private:
  std::string group_;
  std::string host_;
  int nproc_;
  std::vector<std::optional<ft_wire::SyncLine>> lines_;  // by local rank
  int given_ = 0;
};

// Each local rank's answer (index = local rank) to the group `group`'s call,
// from the quorum server's answer, for the node that is part `part` of the
// group's `parts` nodes (its local rank l is the group's rank
// part * nproc + l). InvalidArgument when a member's address cannot be read
// or has fewer ranks than nproc * parts; NotFound when `group` is not in
// the quorum.
Result<std::vector<ft_wire::QuorumLine>> FtRankAnswers(const rdzv::SyncAnswer& answer, const std::string& group,
                                                       int nproc, int part = 0, int parts = 1);

}  // namespace ctrun::launcher
