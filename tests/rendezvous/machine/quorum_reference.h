// ReferenceQuorum: QuorumMachine (rendezvous/machine/quorum.h) as it was
// before its counts were kept incrementally: every Tick and NextDeadline
// scans every group (O(N) per call). Test-only: quorum_incremental_test.cc
// checks that the incremental machine decides as this one does, on random
// event sequences.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "rendezvous/machine/quorum.h"

namespace ctrun::rdzv::reference {

class ReferenceQuorum {
 public:
  explicit ReferenceQuorum(QuorumParams params) : params_(params) {}

  void Request(const QuorumMember& member, TimePoint now);
  void Heartbeat(const std::string& id, TimePoint now);
  void Lost(const std::string& id, TimePoint now);
  void Bench(const std::string& id, TimePoint until);
  std::optional<Quorum> Tick(TimePoint now);

  // Why the last Tick did or did not form a quorum.
  const std::string& reason() const { return reason_; }
  // The previous quorum, if any has formed.
  const std::optional<Quorum>& last() const { return last_; }
  // The first instant after `now` at which a Tick may decide otherwise
  // without any new input (a straggler's join timeout running out, a
  // heartbeat growing stale), or nullopt when nobody is waiting.
  std::optional<TimePoint> NextDeadline(TimePoint now) const;
  // Participants waiting for a quorum now, by id.
  std::vector<std::string> Waiting() const;

 private:
  struct Participant {
    QuorumMember member;
    TimePoint asked;   // when this request came
    uint64_t order;    // arrival order of the group's first request
  };
  bool Healthy(const std::string& id, TimePoint now) const;
  // A benched group (not Lost) at a later step than every one of `members`.
  std::optional<std::string> AheadAndBenched(const std::vector<QuorumMember>& members, TimePoint now) const;
  std::vector<QuorumMember> Choose(const std::vector<const Participant*>& ready) const;
  std::optional<Quorum> FormUnlessAhead(const std::vector<const Participant*>& ready, TimePoint now, std::string why,
                                        const std::string& counts);
  Quorum Form(std::vector<QuorumMember> members);

  QuorumParams params_;
  std::map<std::string, TimePoint> alive_;  // last heartbeat or request, per group
  std::map<std::string, uint64_t> first_seen_;
  std::map<std::string, Participant> waiting_;
  std::map<std::string, TimePoint> benched_;  // not counted before this instant
  std::set<std::string> silent_;              // benched while not asking: not counted until it asks
  std::map<std::string, int64_t> step_of_;    // each group's last asked step
  std::optional<Quorum> last_;
  int64_t next_id_ = 1;
  std::string reason_ = "no quorum asked for yet";
};

inline void ReferenceQuorum::Request(const QuorumMember& member, TimePoint now) {
  alive_[member.id] = now;
  const uint64_t order = first_seen_.emplace(member.id, first_seen_.size()).first->second;
  waiting_[member.id] = Participant{member, now, order};
  silent_.erase(member.id);
  step_of_[member.id] = member.step;
}

inline void ReferenceQuorum::Heartbeat(const std::string& id, TimePoint now) { alive_[id] = now; }

inline void ReferenceQuorum::Lost(const std::string& id, TimePoint) {
  alive_.erase(id);
  waiting_.erase(id);
  first_seen_.erase(id);  // what is kept is bounded by the live groups; back later, it asks anew
  benched_.erase(id);
  silent_.erase(id);
  step_of_.erase(id);
}

inline std::optional<std::string> ReferenceQuorum::AheadAndBenched(const std::vector<QuorumMember>& members,
                                                          TimePoint now) const {
  int64_t top = 0;
  for (const auto& m : members) top = std::max(top, m.step);
  for (const auto& [id, until] : benched_) {
    auto step = step_of_.find(id);
    const bool held = now < until || silent_.count(id);
    if (held && alive_.count(id) && step != step_of_.end() && step->second > top) return id;
  }
  return std::nullopt;
}

// The quorum of `ready`, unless a benched group at a later step must be waited for.
inline std::optional<Quorum> ReferenceQuorum::FormUnlessAhead(const std::vector<const Participant*>& ready, TimePoint now,
                                                     std::string why, const std::string& counts) {
  std::vector<QuorumMember> members = Choose(ready);
  if (auto ahead = AheadAndBenched(members, now)) {
    reason_ = "waiting for replica group " + *ahead +
              ", held back for being late at a later step than the groups asking" + counts;
    return std::nullopt;
  }
  reason_ = std::move(why);
  return Form(std::move(members));
}

inline void ReferenceQuorum::Bench(const std::string& id, TimePoint until) {
  benched_[id] = until;
  if (!waiting_.count(id)) silent_.insert(id);
}

inline bool ReferenceQuorum::Healthy(const std::string& id, TimePoint now) const {
  auto it = alive_.find(id);
  if (it == alive_.end() || now - it->second >= params_.heartbeat_timeout || silent_.count(id)) return false;
  auto benched = benched_.find(id);
  return benched == benched_.end() || now >= benched->second;
}

inline std::vector<QuorumMember> ReferenceQuorum::Choose(const std::vector<const Participant*>& ready) const {
  std::set<std::string> previous;
  if (last_) {
    for (const auto& m : last_->members) previous.insert(m.id);
  }
  std::vector<const Participant*> order = ready;
  std::sort(order.begin(), order.end(), [&](const Participant* a, const Participant* b) {
    const bool pa = previous.count(a->member.id) > 0, pb = previous.count(b->member.id) > 0;
    if (pa != pb) return pa;
    if (a->order != b->order) return a->order < b->order;
    return a->member.id < b->member.id;
  });
  if (order.size() > static_cast<size_t>(params_.max_replicas)) order.resize(static_cast<size_t>(params_.max_replicas));
  std::vector<QuorumMember> members;
  for (const Participant* p : order) members.push_back(p->member);
  std::sort(members.begin(), members.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return members;
}

inline Quorum ReferenceQuorum::Form(std::vector<QuorumMember> members) {
  bool changed = !last_ || last_->members.size() != members.size();
  for (size_t i = 0; !changed && i < members.size(); ++i) changed = last_->members[i].id != members[i].id;
  bool failures = false;
  for (const auto& m : members) failures = failures || m.commit_failures > 0;
  Quorum quorum{.id = (changed || failures) ? next_id_++ : last_->id, .members = std::move(members)};
  for (const auto& m : quorum.members) waiting_.erase(m.id);
  last_ = quorum;
  return quorum;
}

inline std::optional<Quorum> ReferenceQuorum::Tick(TimePoint now) {
  std::erase_if(benched_, [&](const auto& b) { return now >= b.second && !silent_.count(b.first); });
  std::vector<const Participant*> ready;
  for (const auto& [id, p] : waiting_) {
    if (Healthy(id, now)) ready.push_back(&p);
  }
  size_t healthy = 0;
  for (const auto& [id, at] : alive_) healthy += Healthy(id, now) ? 1 : 0;
  std::string counts = " (" + std::to_string(ready.size()) + " asking, " + std::to_string(healthy) + " healthy";
  if (!benched_.empty()) counts += ", " + std::to_string(benched_.size()) + " held back for being late";
  counts += ", min " + std::to_string(params_.min_replicas) + ")";
  if (ready.empty()) {
    reason_ = "no healthy group is asking" + counts;
    return std::nullopt;
  }
  if (last_) {
    bool all_back = true;
    for (const auto& m : last_->members) {
      all_back = all_back && waiting_.count(m.id) > 0 && Healthy(m.id, now);
    }
    if (all_back) {
      return FormUnlessAhead(ready, now, "fast quorum: every member of quorum " + std::to_string(last_->id) +
                                             " asked again" + counts, counts);
    }
  }
  if (ready.size() < static_cast<size_t>(params_.min_replicas)) {
    reason_ = "waiting: fewer groups asking than --ft-replicas MIN" + counts;
    return std::nullopt;
  }
  if (ready.size() * 2 <= healthy) {
    reason_ = "waiting: the groups asking are not a majority of the healthy ones" + counts;
    return std::nullopt;
  }
  if (ready.size() < healthy) {
    TimePoint first = ready.front()->asked;
    for (const Participant* p : ready) first = std::min(first, p->asked);
    if (now - first < params_.join_timeout) {
      reason_ = "waiting for healthy groups that have not asked yet, until the join timeout" + counts;
      return std::nullopt;
    }
  }
  return FormUnlessAhead(ready, now, "new quorum" + counts, counts);
}

inline std::optional<TimePoint> ReferenceQuorum::NextDeadline(TimePoint now) const {
  if (waiting_.empty()) return std::nullopt;
  std::optional<TimePoint> next;
  auto take = [&](TimePoint t) {
    if (t > now) next = next ? std::min(*next, t) : t;
  };
  for (const auto& [id, p] : waiting_) take(p.asked + params_.join_timeout);
  for (const auto& [id, at] : alive_) take(at + params_.heartbeat_timeout);
  for (const auto& [id, until] : benched_) take(until);
  return next;
}

inline std::vector<std::string> ReferenceQuorum::Waiting() const {
  std::vector<std::string> out;
  for (const auto& [id, p] : waiting_) out.push_back(id);
  return out;
}

}  // namespace ctrun::rdzv::reference
