#include "rendezvous/machine/step_sync.h"

namespace ctrun::rdzv {

void StepSync::Call(const SyncCall& call, TimePoint now) {
  Held held{.call = call, .decision = std::nullopt, .asked = false};
  const bool counts = call.ballot && vote_ && call.ballot->quorum_id == vote_->quorum_id() &&
                      call.ballot->step == vote_->step();
  if (!counts) held.call.ballot.reset();  // none, or for a quorum that is gone
  if (held.call.ballot) vote_->Vote(call.group, call.ballot->quorum_id, call.ballot->step, call.ballot->ok);
  held_[call.group] = std::move(held);
  quorum_.Heartbeat(call.group, now);
  AskDecided(now);
}

void StepSync::Lost(const std::string& group, TimePoint now) {
  held_.erase(group);
  if (vote_) vote_->Lost(group);
  quorum_.Lost(group, now);
  AskDecided(now);
}

void StepSync::AskDecided(TimePoint now) {
  for (auto& [group, held] : held_) {
    if (held.asked) continue;
    int64_t step = held.call.committed_step;
    int64_t failures = 0;
    if (held.call.ballot) {
      if (!vote_->Decision()) continue;  // its request waits for the decision
      held.decision = *vote_->Decision();
      if (*held.decision) step = held.call.ballot->step + 1;
      failures = *held.decision ? 0 : 1;  // a discarded step: rebuild the communicator (a new quorum id)
    }
    quorum_.Request(QuorumMember{.id = group, .step = step, .address = held.call.address,
                                 .commit_failures = failures},
                    now);
    held.asked = true;
  }
}

std::vector<SyncAnswer> StepSync::Tick(TimePoint now) {
  std::optional<Quorum> formed = quorum_.Tick(now);
  if (!formed) return {};
  std::vector<SyncAnswer> answers;
  for (const auto& member : formed->members) {
    auto it = held_.find(member.id);
    if (it == held_.end()) continue;
    answers.push_back(SyncAnswer{.group = member.id, .commit = it->second.decision, .quorum = *formed});
    held_.erase(it);
  }
  std::vector<std::string> ids;
  for (const auto& member : formed->members) ids.push_back(member.id);
  vote_.emplace(formed->id, formed->max_step(), ids);
  return answers;
}

std::vector<std::string> StepSync::Pending() const {
  std::vector<std::string> out;
  for (const auto& [group, held] : held_) out.push_back(group);
  return out;
}

}  // namespace ctrun::rdzv
