#include "trainer/data/step_share.h"

#include <algorithm>
#include <limits>
#include <string>

namespace ctrun::trainer {

Result<SampleRange> StepShare(int64_t step, int64_t global_batch, int share, int shares) {
  if (step < 0 || global_batch < 1 || shares < 1 || share < 0 || share >= shares) {
    return Status::InvalidArgument("StepShare: step " + std::to_string(step) + ", global batch " +
                                   std::to_string(global_batch) + ", share " + std::to_string(share) + " of " +
                                   std::to_string(shares) + " is out of range");
  }
  if (step > std::numeric_limits<int64_t>::max() / global_batch - 1) {
    return Status::InvalidArgument("StepShare: step " + std::to_string(step) + " x global batch " +
                                   std::to_string(global_batch) + " passes the stream's 64-bit positions");
  }
  const int64_t first = step * global_batch;
  const int64_t base = global_batch / shares, extra = global_batch % shares;
  const int64_t begin = first + share * base + std::min<int64_t>(share, extra);
  return SampleRange{.begin = begin, .end = begin + base + (share < extra ? 1 : 0)};
}

StreamPlace PlaceOf(int64_t position, int64_t dataset_size) {
  return StreamPlace{.epoch = position / dataset_size, .offset = position % dataset_size};
}

}  // namespace ctrun::trainer
