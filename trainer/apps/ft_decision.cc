#include "trainer/apps/ft_decision.h"

#include <cstdio>

namespace ctrun::trainer {

std::string ApplyFtDecision(const ft::FtDecision& decision, const ft::FtPlan& plan, double loss, bool voted_yes,
                            const ft::FtReplica& replica, int64_t& committed, const std::function<void()>& apply) {
  char line[200];
  if (decision.commit.value_or(false)) {
    apply();
    std::snprintf(line, sizeof line, "ft step %lld quorum %lld replicas %d loss %.6f",
                  static_cast<long long>(committed), static_cast<long long>(plan.quorum_id), plan.replica_world,
                  loss);
    ++committed;
  } else {
    std::snprintf(line, sizeof line, "ft discard step %lld quorum %lld: %s", static_cast<long long>(committed),
                  static_cast<long long>(plan.quorum_id),
                  voted_yes ? "another member voted no" : replica.last_failure().message().c_str());
  }
  return line;
}

}  // namespace ctrun::trainer
