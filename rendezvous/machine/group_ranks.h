// Group-rank assignment for a round that is complete: pure, deterministic.
//
// Rules, in order:
//  1. Hints: if EVERY candidate gave a hint (--node-rank) and the hints are
//     distinct and each is below the node count n, rank = hint.
//  2. Otherwise (hints ignored, with a note if any were given):
//     a. a returning member keeps its previous rank if it is below n;
//     b. the free ranks, lowest first, go to the returning members whose old
//        rank is >= n (in old-rank order), then to newcomers in NodeLess
//        order (natural host order, then pid, then local id).
// The result is always the dense ranks 0..n-1. Rule 2 moves as few nodes as
// possible: a spare that replaces a lost node takes exactly its rank, and
// after a shrink only the members whose rank no longer exists move.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "rendezvous/machine/node_order.h"

namespace ctrun::rdzv {

struct RankCandidate {
  NodeId node;
  std::optional<int> previous_rank;  // group rank in the round it last ran in, if it just did
  std::optional<int> hint;           // --node-rank
};

struct RankAssignment {
  std::vector<NodeId> by_rank;  // by_rank[r] holds group rank r
  bool hints_honoured = false;
  std::string hint_note;        // why given hints were ignored; empty if none given or honoured
};

// Candidates must have distinct node ids; previous ranks are expected to be
// distinct (a duplicate keeps its rank only for the NodeLess-first holder).
RankAssignment AssignGroupRanks(const std::vector<RankCandidate>& candidates);

}  // namespace ctrun::rdzv
