#include "rendezvous/machine/group_ranks.h"

#include <algorithm>

namespace ctrun::rdzv {
namespace {

// Empty when the hints can be used; otherwise why not (or "" with
// `any_given` false when nobody gave one).
std::string HintProblem(const std::vector<RankCandidate>& c, bool* any_given) {
  int n = static_cast<int>(c.size());
  int missing = 0;
  for (const RankCandidate& x : c) missing += x.hint.has_value() ? 0 : 1;
  *any_given = missing < n;
  if (!*any_given) return "no hints";
  if (missing > 0) {
    return "--node-rank ignored: " + std::to_string(missing) + " of " + std::to_string(n) +
           " nodes gave none (give every node a distinct --node-rank below the node count, or none)";
  }
  std::vector<const RankCandidate*> holder(n, nullptr);
  for (const RankCandidate& x : c) {
    int h = *x.hint;
    if (h < 0 || h >= n) {
      return "--node-rank " + std::to_string(h) + " of " + ToString(x.node) + " ignored: not below the node count " +
             std::to_string(n) + " (give ranks 0.." + std::to_string(n - 1) + ")";
    }
    if (holder[h] != nullptr) {
      return "--node-rank " + std::to_string(h) + " ignored: given by both " + ToString(holder[h]->node) + " and " +
             ToString(x.node) + " (give each node a distinct rank)";
    }
    holder[h] = &x;
  }
  return "";
}

}  // namespace

RankAssignment AssignGroupRanks(const std::vector<RankCandidate>& candidates) {
  int n = static_cast<int>(candidates.size());
  RankAssignment out;
  out.by_rank.resize(n);

  bool any_hint = false;
  std::string problem = HintProblem(candidates, &any_hint);
  if (any_hint && problem.empty()) {
    for (const RankCandidate& x : candidates) out.by_rank[*x.hint] = x.node;
    out.hints_honoured = true;
    return out;
  }
  if (any_hint) out.hint_note = problem;

  std::vector<const RankCandidate*> sorted;
  for (const RankCandidate& x : candidates) sorted.push_back(&x);
  std::sort(sorted.begin(), sorted.end(), [](const RankCandidate* a, const RankCandidate* b) {
    return NodeLess(a->node, b->node);
  });

  std::vector<bool> taken(n, false);
  std::vector<const RankCandidate*> displaced, newcomers;
  for (const RankCandidate* x : sorted) {
    if (!x->previous_rank) {
      newcomers.push_back(x);
    } else if (*x->previous_rank >= 0 && *x->previous_rank < n && !taken[*x->previous_rank]) {
      taken[*x->previous_rank] = true;
      out.by_rank[*x->previous_rank] = x->node;
    } else {
      displaced.push_back(x);
    }
  }
  std::stable_sort(displaced.begin(), displaced.end(), [](const RankCandidate* a, const RankCandidate* b) {
    return *a->previous_rank < *b->previous_rank;
  });

  int next_free = 0;
  auto place = [&](const RankCandidate* x) {
    while (taken[next_free]) ++next_free;
    taken[next_free] = true;
    out.by_rank[next_free] = x->node;
  };
  for (const RankCandidate* x : displaced) place(x);
  for (const RankCandidate* x : newcomers) place(x);
  return out;
}

}  // namespace ctrun::rdzv
