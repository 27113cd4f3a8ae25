#include "rendezvous/machine/step_vote.h"

namespace ctrun::rdzv {

StepVote::StepVote(int64_t quorum_id, int64_t step, const std::vector<std::string>& members)
    : quorum_id_(quorum_id), step_(step) {
  for (const auto& id : members) votes_[id] = std::nullopt;
  pending_ = votes_.size();
  if (votes_.empty()) decision_ = false;  // nobody to commit it
}

bool StepVote::Vote(const std::string& id, int64_t quorum_id, int64_t step, bool ok) {
  auto it = votes_.find(id);
  if (it == votes_.end() || quorum_id != quorum_id_ || step != step_) return false;
  if (!it->second || !ok) Set(it->second, ok);
  if (decision_) return true;  // decided already: a late vote changes nothing
  if (!ok) {
    decision_ = false;
    return true;
  }
  if (yes_ == votes_.size()) decision_ = true;
  return true;
}

void StepVote::Lost(const std::string& id) {
  auto it = votes_.find(id);
  if (it == votes_.end() || it->second) return;
  Set(it->second, false);  // its no: it is not pending (a lost group is not late, step_sync.h)
  if (!decision_) decision_ = false;
}

void StepVote::Excuse(const std::string& id) {
  auto it = votes_.find(id);
  if (it == votes_.end() || it->second) return;
  votes_.erase(it);
  --pending_;
  if (decision_) return;
  const bool all_yes = !votes_.empty() && yes_ == votes_.size();
  if (all_yes || votes_.empty()) decision_ = all_yes;
}

void StepVote::Set(std::optional<bool>& vote, bool ok) {
  if (!vote) --pending_;
  if (vote.value_or(false)) --yes_;
  vote = ok;
  if (ok) ++yes_;
}

std::vector<std::string> StepVote::Pending() const {
  std::vector<std::string> out;
  for (const auto& [id, vote] : votes_) {
    if (!vote) out.push_back(id);
  }
  return out;
}

}  // namespace ctrun::rdzv
