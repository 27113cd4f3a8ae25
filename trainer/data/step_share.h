// StepShare: which samples a data-parallel rank trains on in one step of
// fault-tolerant training (docs/fault-tolerance.md, "Data"). The run reads
// one stream of sample positions (epoch e's order is positions
// [e * dataset_size, (e + 1) * dataset_size), the order itself as
// DistributedSampler's with one replica); committed step s consumes positions
// [s * global_batch, (s + 1) * global_batch), whoever is alive. Those are
// divided among the quorum's `shares` data-parallel ranks (replica groups x
// ranks per group; share = replica_rank * group_size + rank in the group) in
// contiguous slices, the first global_batch % shares slices one longer.
//
// So the samples of a step depend on the step alone: a discarded step is run
// again, under the next quorum, on the same positions, divided among the
// ranks then alive (reassigned, not lost), and every committed step consumes
// its global batch exactly once. (torchft's replicas each read their own
// stream: a discarded step's samples are gone.)
//
// Pure arithmetic; free functions.
#pragma once

#include <cstdint>

#include "base/result.h"

namespace ctrun::trainer {

struct SampleRange {
  int64_t begin = 0;  // stream positions [begin, end)
  int64_t end = 0;
  bool operator==(const SampleRange&) const = default;
};

// Share `share` of `shares` of step `step`'s positions. InvalidArgument
// when step < 0, global_batch < 1, shares < 1 or share is outside
// [0, shares), or the step's positions pass INT64_MAX.
Result<SampleRange> StepShare(int64_t step, int64_t global_batch, int share, int shares);

// Where stream position `position` (>= 0) is: its epoch and its offset in
// that epoch's order. Requires dataset_size >= 1.
struct StreamPlace {
  int64_t epoch = 0;
  int64_t offset = 0;
  bool operator==(const StreamPlace&) const = default;
};
StreamPlace PlaceOf(int64_t position, int64_t dataset_size);

}  // namespace ctrun::trainer
