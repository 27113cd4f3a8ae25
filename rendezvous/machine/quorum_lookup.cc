#include "rendezvous/machine/quorum_lookup.h"

#include <algorithm>
#include <utility>

namespace ctrun::rdzv {

QuorumLookup::QuorumLookup(std::shared_ptr<const Quorum> quorum)
    : quorum_(std::move(quorum)), max_step_(quorum_->max_step()) {
  const std::vector<QuorumMember>& members = quorum_->members;
  rank_.reserve(members.size());
  healing_index_.resize(members.size());
  size_t healing = 0;  // members are sorted by id: PlanFor counts the healing ones with a smaller id
  for (size_t i = 0; i < members.size(); ++i) {
    rank_.emplace(members[i].id, i);
    healing_index_[i] = healing;
    if (members[i].step == max_step_) {
      up_to_date_.push_back(i);
    } else {
      ++healing;
    }
  }
}

std::optional<CompactPart> QuorumLookup::PartOf(const std::string& member_id, size_t max_sources) const {
  auto it = rank_.find(member_id);
  if (it == rank_.end()) return std::nullopt;
  const std::vector<QuorumMember>& members = quorum_->members;
  const size_t rank = it->second;
  CompactPart part{.rank = static_cast<int>(rank), .world = static_cast<int>(members.size()), .max_step = max_step_,
                   .right = members.size() > 1 ? &members[(rank + 1) % members.size()] : nullptr,
                   .heal = members[rank].step < max_step_,
                   .serve = members[rank].step == max_step_ && up_to_date_.size() < members.size(),
                   .sources = {}};
  if (!part.heal || up_to_date_.empty()) return part;
  const size_t n = std::min(max_sources, up_to_date_.size());
  part.sources.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    part.sources.push_back(&members[up_to_date_[(healing_index_[rank] + k) % up_to_date_.size()]]);
  }
  return part;
}

QuorumPart OwnedPart(const CompactPart& part, const Quorum& quorum) {
  QuorumPart out{.rank = part.rank, .world = part.world, .max_step = part.max_step, .right = std::nullopt,
                 .heal = part.heal, .serve = part.serve, .sources = {}, .members = {}};
  if (part.right) out.right = *part.right;
  out.sources.reserve(part.sources.size());
  for (const QuorumMember* m : part.sources) out.sources.push_back(*m);
  if (quorum.members.size() <= kCompactMembersMax) out.members = quorum.members;
  return out;
}

}  // namespace ctrun::rdzv
