#include "launcher/ft/group_sync.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <string_view>
#include <unordered_map>

#include "base/ft_wire/host_port.h"
#include "launcher/cli/text.h"
#include "rendezvous/machine/quorum_plan.h"

namespace ctrun::launcher {
namespace {

// Where one rank of a group listens.
struct RankAddress {
  std::string host;  // brackets kept for IPv6: ready for "host:port"
  uint16_t ring = 0;
  uint16_t heal = 0;
};

bool ParsePort(std::string_view s, uint16_t& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size() && out != 0;
}

// A member's address: its nodes' parts joined with ';' in node order (the
// quorum server joins them), each "<host>|<ring>/<heal>,...". Its ranks in
// group rank order.
Result<std::vector<RankAddress>> ParseAddress(const rdzv::QuorumMember& m) {
  Status bad = Status::InvalidArgument(fmt::format(
      "replica group '{}' sent an address this agent cannot read ('{}'): are all nodes running the same "
      "ctrun?",
      QuotePart(m.id), QuotePart(m.address)));
  std::vector<RankAddress> out;
  for (std::string_view part : Split(m.address, ';')) {
    const size_t bar = part.find('|');
    if (bar == std::string_view::npos || bar == 0) return bad;
    for (std::string_view entry : Split(part.substr(bar + 1), ',')) {
      const std::vector<std::string_view> ports = Split(entry, '/');
      RankAddress a{.host = std::string(part.substr(0, bar)), .ring = 0, .heal = 0};
      if (ports.size() != 2 || !ParsePort(ports[0], a.ring) || !ParsePort(ports[1], a.heal)) return bad;
      out.push_back(std::move(a));
    }
  }
  return out;
}

}  // namespace

FtGroupSync::FtGroupSync(std::string group, std::string host, int nproc)
    : group_(std::move(group)),
      host_(host.find(':') != std::string::npos ? "[" + host + "]" : std::move(host)),
      nproc_(nproc),
      lines_(static_cast<size_t>(nproc)) {}

Status FtGroupSync::Add(const ft_wire::SyncLine& line) {
  if (line.local_rank >= nproc_) {
    return Status::InvalidArgument(fmt::format(
        "local rank {} sent a sync line, but this node runs {} workers (local ranks 0..{})", line.local_rank,
        nproc_, nproc_ - 1));
  }
  auto& slot = lines_[static_cast<size_t>(line.local_rank)];
  if (slot) {
    return Status::InvalidArgument(fmt::format(
        "local rank {} sent a second sync line before its first was answered (one line per step)",
        line.local_rank));
  }
  slot = line;
  ++given_;
  return Status::Ok();
}

Result<rdzv::SyncCall> FtGroupSync::Call() const {
  rdzv::SyncCall call{.group = group_, .committed_step = lines_[0]->committed_step, .address = host_ + "|",
                      .ballot = std::nullopt};
  for (int r = 0; r < nproc_; ++r) {
    const ft_wire::SyncLine& line = *lines_[static_cast<size_t>(r)];
    if (line.committed_step != call.committed_step) {
      return Status::InvalidArgument(fmt::format(
          "the workers of this node disagree on the committed step (local rank 0: {}, local rank {}: {}); "
          "each step is committed by all of them alike, so this is a bug in the training script",
          call.committed_step, r, line.committed_step));
    }
    call.address += fmt::format("{}{}/{}", r == 0 ? "" : ",", line.ring_port, line.heal_port);
  }
  for (int r = 0; r < nproc_; ++r) {
    const std::optional<ft_wire::Ballot>& b = lines_[static_cast<size_t>(r)]->ballot;
    if (!b) continue;
    if (!call.ballot) {
      call.ballot = rdzv::Ballot{.quorum_id = b->quorum_id, .step = b->step, .ok = true};
    }
    const bool same = b->quorum_id == call.ballot->quorum_id && b->step == call.ballot->step;
    call.ballot->ok = call.ballot->ok && same && b->ok;
    call.ballot->late = call.ballot->late || (same && b->late);
  }
  if (call.ballot) {  // a rank that did not vote where the others did votes no
    for (int r = 0; r < nproc_; ++r) {
      if (!lines_[static_cast<size_t>(r)]->ballot) call.ballot->ok = false;
    }
    call.ballot->late = call.ballot->late && !call.ballot->ok;
  }
  return call;
}

void FtGroupSync::Reset() {
  for (auto& line : lines_) line.reset();
  given_ = 0;
}

uint32_t FtCompactSources(int nproc, int parts) {
  const int64_t ranks = int64_t{std::max(nproc, 1)} * std::max(parts, 1);
  return static_cast<uint32_t>(std::min<int64_t>(ranks + 2, kFtMaxCompactSources));
}

namespace {

// A member's address read: at least `ranks` ranks, as many as this group's.
Result<std::vector<RankAddress>> ReadRanks(const rdzv::QuorumMember& m, int ranks) {
  Result<std::vector<RankAddress>> a = ParseAddress(m);
  if (!a.ok()) return a.status();
  if (static_cast<int>(a->size()) < ranks) {
    return Status::InvalidArgument(fmt::format(
        "replica group '{}' runs {} workers and this one {}: under --ft-replicas every group runs the same "
        "number (--nproc-per-node and --ft-group-size)",
        QuotePart(m.id), a->size(), ranks));
  }
  return a;
}

// FtRankAnswers from the whole quorum: every member's address is read.
// O(N) per rank in the quorum's N members.
Result<std::vector<ft_wire::QuorumLine>> WholeQuorumAnswers(const rdzv::SyncAnswer& answer, const std::string& group,
                                                            int nproc, int part, int parts) {
  const rdzv::Quorum& q = *answer.quorum;
  std::vector<std::vector<RankAddress>> addresses;
  for (const rdzv::QuorumMember& m : q.members) {
    Result<std::vector<RankAddress>> a = ReadRanks(m, nproc * parts);
    if (!a.ok()) return a.status();
    addresses.push_back(std::move(*a));
  }
  const std::optional<size_t> me = q.rank_of(group);
  if (!me) return Status::NotFound(fmt::format("replica group '{}' is not in quorum {}", QuotePart(group), q.id));
  std::unordered_map<std::string_view, size_t> by_address;  // PlanFor's sources back to their members: the first
  for (size_t k = 0; k < q.members.size(); ++k) by_address.emplace(q.members[k].address, k);
  const int64_t max_step = q.max_step();
  bool behind = false;
  for (const auto& m : q.members) behind = behind || m.step < max_step;
  std::vector<ft_wire::QuorumLine> out;
  const size_t world = q.members.size();
  for (int local = 0; local < nproc; ++local) {
    const int r = part * nproc + local;  // the rank in the group: its peers are rank r of the others
    const size_t i = static_cast<size_t>(r);
    ft_wire::QuorumLine a{.commit = answer.commit, .quorum_id = q.id, .replica_rank = static_cast<int>(*me),
                          .replica_world = static_cast<int>(world), .max_step = max_step, .right_host = "",
                          .right_port = 0, .heal_sources = {}, .serve = q.members[*me].step == max_step && behind};
    const size_t right = (*me + 1) % world;
    if (world > 1) {
      a.right_host = addresses[right][i].host;
      a.right_port = addresses[right][i].ring;
    }
    Result<rdzv::QuorumPlan> plan = rdzv::PlanFor(q, group, r);
    if (!plan.ok()) return plan.status();
    if (plan->heal) {
      for (const std::string& source : plan->sources) {  // each is a member's address
        const auto it = by_address.find(source);
        if (it == by_address.end()) continue;
        const RankAddress& s = addresses[it->second][i];
        a.heal_sources.push_back(ft_wire::FormatHostPort(s.host, s.heal));
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

// FtRankAnswers from the group's compact part: only its right neighbour's
// and its sources' addresses are read.
Result<std::vector<ft_wire::QuorumLine>> PartAnswers(const rdzv::SyncAnswer& answer, const rdzv::QuorumPart& p,
                                                     const std::string& group, int nproc, int part, int parts) {
  const int ranks = nproc * parts;
  std::vector<RankAddress> right;
  if (p.world > 1) {
    if (!p.right) {
      return Status::InvalidArgument(fmt::format(
          "the quorum server's answer to replica group '{}' names no ring neighbour in a quorum of {} groups: "
          "run the same version of ctrun and ctrund",
          QuotePart(group), p.world));
    }
    Result<std::vector<RankAddress>> a = ReadRanks(*p.right, ranks);
    if (!a.ok()) return a.status();
    right = std::move(*a);
  }
  if (p.heal && p.sources.empty()) {
    return Status::InvalidArgument(fmt::format(
        "the quorum server's answer tells replica group '{}' to heal but names no source: run the same version "
        "of ctrun and ctrund",
        QuotePart(group)));
  }
  std::vector<std::vector<RankAddress>> sources;  // read only when the group heals
  for (size_t k = 0; p.heal && k < p.sources.size(); ++k) {
    Result<std::vector<RankAddress>> a = ReadRanks(p.sources[k], ranks);
    if (!a.ok()) return a.status();
    sources.push_back(std::move(*a));
  }
  std::vector<ft_wire::QuorumLine> out;
  for (int local = 0; local < nproc; ++local) {
    const size_t r = static_cast<size_t>(part * nproc + local);  // the rank in the group
    ft_wire::QuorumLine a{.commit = answer.commit, .quorum_id = answer.quorum->id, .replica_rank = p.rank,
                          .replica_world = p.world, .max_step = p.max_step, .right_host = "", .right_port = 0,
                          .heal_sources = {}, .serve = p.serve};
    if (!right.empty()) {
      a.right_host = right[r].host;
      a.right_port = right[r].ring;
    }
    for (size_t k = 0; k < sources.size(); ++k) {  // sources[r mod n] first, then the rest in rotation
      const RankAddress& s = sources[(r + k) % sources.size()][r];
      a.heal_sources.push_back(ft_wire::FormatHostPort(s.host, s.heal));
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace

Result<std::vector<ft_wire::QuorumLine>> FtRankAnswers(const rdzv::SyncAnswer& answer, const std::string& group,
                                                       int nproc, int part, int parts) {
  if (answer.part) return PartAnswers(answer, *answer.part, group, nproc, part, parts);
  return WholeQuorumAnswers(answer, group, nproc, part, parts);
}

}  // namespace ctrun::launcher
