#include "rendezvous/machine/quorum_plan.h"

namespace ctrun::rdzv {

Result<QuorumPlan> PlanFor(const Quorum& quorum, const std::string& member_id, int group_rank) {
  const std::optional<size_t> rank = quorum.rank_of(member_id);
  if (!rank) return Status::NotFound("group '" + member_id + "' is not in quorum " + std::to_string(quorum.id));
  QuorumPlan plan{.quorum_id = quorum.id,
                  .replica_rank = static_cast<int>(*rank),
                  .replica_world = static_cast<int>(quorum.members.size()),
                  .max_step = quorum.max_step(),
                  .store_prefix = "ft/q" + std::to_string(quorum.id) + "/",
                  .heal = false,
                  .sources = {}};
  std::vector<const QuorumMember*> up_to_date;
  size_t healing_index = 0;  // this group's index among the healing members
  for (const auto& m : quorum.members) {
    if (m.step == plan.max_step) {
      up_to_date.push_back(&m);
    } else if (m.id < member_id) {
      ++healing_index;
    }
  }
  plan.heal = quorum.members[*rank].step < plan.max_step;
  if (!plan.heal) return plan;
  const size_t first = (healing_index + static_cast<size_t>(group_rank)) % up_to_date.size();
  for (size_t i = 0; i < up_to_date.size(); ++i) {
    plan.sources.push_back(up_to_date[(first + i) % up_to_date.size()]->address);
  }
  return plan;
}

}  // namespace ctrun::rdzv
