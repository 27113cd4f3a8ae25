#include "rendezvous/machine/quorum.h"

#include <algorithm>
#include <set>

namespace ctrun::rdzv {

Status CheckQuorumParams(const QuorumParams& params) {
  if (params.min_replicas < 1) {
    return Status::InvalidArgument("quorum: min_replicas " + std::to_string(params.min_replicas) +
                                   " is below 1; give --ft-replicas MIN:MAX with MIN >= 1");
  }
  if (params.max_replicas < params.min_replicas) {
    return Status::InvalidArgument("quorum: max_replicas " + std::to_string(params.max_replicas) +
                                   " is below min_replicas " + std::to_string(params.min_replicas) +
                                   "; give --ft-replicas MIN:MAX with MIN <= MAX");
  }
  if (params.join_timeout <= Duration::zero() || params.heartbeat_timeout <= Duration::zero()) {
    return Status::InvalidArgument("quorum: the join and heartbeat timeouts must be positive");
  }
  return Status::Ok();
}

int64_t Quorum::max_step() const {
  int64_t out = 0;
  for (const auto& m : members) out = std::max(out, m.step);
  return out;
}

std::optional<size_t> Quorum::rank_of(const std::string& member_id) const {
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].id == member_id) return i;
  }
  return std::nullopt;
}

void QuorumMachine::SetAlive(const std::string& id, TimePoint now) {
  auto [it, added] = alive_.try_emplace(id, now);
  if (!added) {
    alive_by_time_.erase({it->second, id});
    it->second = now;
  }
  alive_by_time_.insert({now, id});
}

void QuorumMachine::Unwait(const std::string& id) {
  auto it = waiting_.find(id);
  if (it == waiting_.end()) return;
  waiting_by_asked_.erase({it->second.asked, id});
  waiting_.erase(it);
}

void QuorumMachine::Request(const QuorumMember& member, TimePoint now) {
  Advance(now);
  SetAlive(member.id, now);
  const uint64_t order = first_seen_.emplace(member.id, first_seen_.size()).first->second;
  Unwait(member.id);
  waiting_[member.id] = Participant{member, now, order};
  waiting_by_asked_.insert({now, member.id});
  silent_.erase(member.id);
  step_of_[member.id] = member.step;
  Refresh(member.id);
}

void QuorumMachine::Heartbeat(const std::string& id, TimePoint now) {
  Advance(now);
  SetAlive(id, now);
  Refresh(id);
}

void QuorumMachine::Pin(const std::string& id, bool pinned, TimePoint now) {
  Advance(now);
  const bool changed = pinned ? pinned_.insert(id).second : pinned_.erase(id) > 0;
  if (changed) SetAlive(id, now);  // a heartbeat when it starts, and its last when it ends
  Refresh(id);
}

void QuorumMachine::Lost(const std::string& id, TimePoint now) {
  Advance(now);
  if (auto it = alive_.find(id); it != alive_.end()) {
    alive_by_time_.erase({it->second, id});
    alive_.erase(it);
  }
  Unwait(id);
  first_seen_.erase(id);  // what is kept is bounded by the live groups; back later, it asks anew
  benched_.erase(id);
  silent_.erase(id);
  step_of_.erase(id);
  pinned_.erase(id);
  Refresh(id);
}

void QuorumMachine::Refresh(const std::string& id) {
  Counted now;
  now.healthy = Healthy(id, now_);
  auto waiting = waiting_.find(id);
  now.ready = now.healthy && waiting != waiting_.end();
  now.returned = now.ready && in_last_.count(id) > 0;
  if (now.ready) now.ready_at = waiting->second.asked;
  auto it = counted_.find(id);
  const Counted before = it == counted_.end() ? Counted{} : it->second;
  healthy_ = healthy_ - (before.healthy ? 1 : 0) + (now.healthy ? 1 : 0);
  returned_ = returned_ - (before.returned ? 1 : 0) + (now.returned ? 1 : 0);
  if (before.ready) ready_.erase({before.ready_at, id});  // its request may have been replaced since
  if (now.ready) ready_.insert({now.ready_at, id});
  if (now.healthy) {
    counted_[id] = now;
  } else if (it != counted_.end()) {
    counted_.erase(it);
  }
}

void QuorumMachine::Advance(TimePoint now) {
  if (now < now_) {  // time went back: recount everything at `now`
    now_ = now;
    counted_.clear();
    ready_.clear();
    healthy_ = returned_ = 0;
    for (const auto& [id, at] : alive_) Refresh(id);
    return;
  }
  const TimePoint before = now_;
  now_ = now;
  if (now == before) return;
  // The heartbeats that grew stale in (before, now].
  for (auto it = alive_by_time_.lower_bound({before - params_.heartbeat_timeout, std::string()});
       it != alive_by_time_.end() && it->first + params_.heartbeat_timeout <= now; ++it) {
    if (!pinned_.count(it->second)) Refresh(it->second);
  }
  // The benches that ran out in (before, now].
  for (const auto& [id, until] : benched_) {
    if (until > before && until <= now) Refresh(id);
  }
}

void QuorumMachine::Bench(const std::string& id, TimePoint until) {
  benched_[id] = until;
  if (!waiting_.count(id)) silent_.insert(id);
  Refresh(id);
}

std::optional<std::string> QuorumMachine::AheadAndBenched(const std::vector<QuorumMember>& members,
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

// The quorum of the ready groups, unless a benched group at a later step
// must be waited for.
std::optional<Quorum> QuorumMachine::FormUnlessAhead(TimePoint now, std::string why, const std::string& counts) {
  std::vector<const Participant*> ready;
  ready.reserve(ready_.size());
  for (const auto& [asked, id] : ready_) ready.push_back(&waiting_.at(id));
  std::vector<QuorumMember> members = Choose(ready);
  if (auto ahead = AheadAndBenched(members, now)) {
    reason_ = "waiting for replica group " + *ahead +
              ", held back for being late at a later step than the groups asking" + counts;
    return std::nullopt;
  }
  reason_ = std::move(why);
  return Form(std::move(members));
}

bool QuorumMachine::Healthy(const std::string& id, TimePoint now) const {
  auto it = alive_.find(id);
  if (it == alive_.end() || silent_.count(id)) return false;
  if (!pinned_.count(id) && now - it->second >= params_.heartbeat_timeout) return false;
  auto benched = benched_.find(id);
  return benched == benched_.end() || now >= benched->second;
}

std::vector<QuorumMember> QuorumMachine::Choose(const std::vector<const Participant*>& ready) const {
  std::vector<const Participant*> order = ready;
  const size_t max = static_cast<size_t>(params_.max_replicas);
  if (order.size() > max) {
    // Who stays: the last quorum's members first, then by arrival, then by
    // id. Each one's membership is looked up once, not per comparison.
    struct Key {
      bool in_last;
      const Participant* p;
    };
    std::vector<Key> keys;
    keys.reserve(order.size());
    for (const Participant* p : order) keys.push_back({in_last_.count(p->member.id) > 0, p});
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
      if (a.in_last != b.in_last) return a.in_last;
      if (a.p->order != b.p->order) return a.p->order < b.p->order;
      return a.p->member.id < b.p->member.id;
    });
    for (size_t i = 0; i < max; ++i) order[i] = keys[i].p;
    order.resize(max);
  }
  std::vector<QuorumMember> members;
  members.reserve(order.size());
  for (const Participant* p : order) members.push_back(p->member);
  std::sort(members.begin(), members.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return members;
}

Quorum QuorumMachine::Form(std::vector<QuorumMember> members) {
  bool changed = !last_ || last_->members.size() != members.size();
  for (size_t i = 0; !changed && i < members.size(); ++i) changed = last_->members[i].id != members[i].id;
  bool failures = false;
  for (const auto& m : members) failures = failures || m.commit_failures > 0;
  Quorum quorum{.id = (changed || failures) ? next_id_++ : last_->id, .members = std::move(members)};
  for (const auto& m : quorum.members) Unwait(m.id);
  std::set<std::string> before = std::move(in_last_);
  in_last_.clear();
  for (const auto& m : quorum.members) in_last_.insert(in_last_.end(), m.id);  // sorted by id
  for (const auto& id : before) {
    if (!in_last_.count(id)) Refresh(id);
  }
  for (const auto& id : in_last_) Refresh(id);
  last_ = quorum;
  return quorum;
}

std::optional<Quorum> QuorumMachine::Tick(TimePoint now) {
  Advance(now);
  std::erase_if(benched_, [&](const auto& b) { return now >= b.second && !silent_.count(b.first); });
  const size_t ready = ready_.size(), healthy = healthy_;
  std::string counts = " (" + std::to_string(ready) + " asking, " + std::to_string(healthy) + " healthy";
  if (!benched_.empty()) counts += ", " + std::to_string(benched_.size()) + " held back for being late";
  counts += ", min " + std::to_string(params_.min_replicas) + ")";
  if (ready == 0) {
    reason_ = "no healthy group is asking" + counts;
    return std::nullopt;
  }
  if (last_ && returned_ == last_->members.size()) {
    return FormUnlessAhead(now, "fast quorum: every member of quorum " + std::to_string(last_->id) +
                                    " asked again" + counts, counts);
  }
  if (ready < static_cast<size_t>(params_.min_replicas)) {
    reason_ = "waiting: fewer groups asking than --ft-replicas MIN" + counts;
    return std::nullopt;
  }
  if (ready * 2 <= healthy) {
    reason_ = "waiting: the groups asking are not a majority of the healthy ones" + counts;
    return std::nullopt;
  }
  if (ready < healthy && now - ready_.begin()->first < params_.join_timeout) {
    reason_ = "waiting for healthy groups that have not asked yet, until the join timeout" + counts;
    return std::nullopt;
  }
  return FormUnlessAhead(now, "new quorum" + counts, counts);
}

namespace {

// The first time after `now` among `by_time`'s times plus `after`, if any.
std::optional<TimePoint> FirstDeadlineAfter(const std::set<std::pair<TimePoint, std::string>>& by_time, Duration after,
                                    TimePoint now) {
  for (auto it = by_time.lower_bound({now - after, std::string()}); it != by_time.end(); ++it) {
    if (it->first + after > now) return it->first + after;
  }
  return std::nullopt;
}

}  // namespace

std::optional<TimePoint> QuorumMachine::NextDeadline(TimePoint now) const {
  if (waiting_.empty()) return std::nullopt;
  std::optional<TimePoint> next;
  auto take = [&](std::optional<TimePoint> t) {
    if (t && *t > now) next = next ? std::min(*next, *t) : *t;
  };
  take(FirstDeadlineAfter(waiting_by_asked_, params_.join_timeout, now));
  take(FirstDeadlineAfter(alive_by_time_, params_.heartbeat_timeout, now));
  for (const auto& [id, until] : benched_) take(until);
  return next;
}

std::vector<std::string> QuorumMachine::Waiting() const {
  std::vector<std::string> out;
  for (const auto& [id, p] : waiting_) out.push_back(id);
  return out;
}

}  // namespace ctrun::rdzv
