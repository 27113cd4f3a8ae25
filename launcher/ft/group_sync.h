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
// The server answers either with the whole quorum (every member's
// address: N members to each of N groups per step) or, when the call asks
// for it (FtCompactSources), with the group's compact part (SyncAnswer.part:
// its ring neighbour and its heal sources only). The agent asks for the
// compact part and reads whichever form the answer holds (an older ctrund
// sends the whole quorum); both give each rank the same answer.
//
// Pure: no I/O. One owner.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/ft_wire/agent_lines.h"
#include "base/ft_wire/worker_lines.h"
#include "base/result.h"
#include "launcher/cli/launch_config.h"
#include "rendezvous/machine/step_sync.h"

namespace ctrun::launcher {

// The most workers a node may run under --ft-replicas: its address must fit
// the quorum server's 1024 bytes.
inline constexpr int kFtMaxLocalRanks = 64;
// The most heal sources a node asks for: a group's most ranks (with
// --ft-group-size's kFtMaxGroupNodes, launch_config.h), and 2.
inline constexpr uint32_t kFtMaxCompactSources = kFtMaxLocalRanks * kFtMaxGroupNodes + 2;

// The heal sources a node of a group of `parts` nodes with `nproc` workers
// each asks for in its compact answer (FtSyncRequest.compact_sources): one
// per rank of the group, as rank r takes sources[r] first (the source
// PlanFor assigns it), and 2 more, so that even the group's last rank has
// two alternates in its own rotation (for a source that dies
// mid-transfer) before the list wraps round. Between 3 and
// kFtMaxCompactSources (inputs below 1 count as 1). The server cuts the
// list to the members at the quorum's max step.
uint32_t FtCompactSources(int nproc, int parts);

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
// part * nproc + l).
//
// From answer.part when set (the compact answer): rank r rings to rank r of
// `right`, and heals from rank r of sources[r mod n], then of the others in
// rotation (n the sources' count). With every up-to-date member among the
// sources this is exactly what the whole quorum gives; with fewer, rank r
// below n still gets its assigned source first, and every rank an
// up-to-date one. Otherwise from the whole quorum (answer.quorum).
//
// InvalidArgument when an address it reads cannot be read or has fewer
// ranks than nproc * parts (the whole quorum: any member's; the part: its
// right neighbour's and sources'), or when a compact part lacks the right
// neighbour of a quorum of several or the sources of a group that heals;
// NotFound when `group` is not in the whole quorum.
Result<std::vector<ft_wire::QuorumLine>> FtRankAnswers(const rdzv::SyncAnswer& answer, const std::string& group,
                                                       int nproc, int part = 0, int parts = 1);

}  // namespace ctrun::launcher
