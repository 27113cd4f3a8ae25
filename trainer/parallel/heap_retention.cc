#include "trainer/parallel/heap_retention.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <climits>

namespace ctrun::trainer {

bool RetainFreedHeap() {
#if defined(__GLIBC__)
  // glibc's largest mmap threshold (HEAP_MAX / 2 on 64-bit); setting it also
  // stops the dynamic adjustment.
  constexpr int kMmapThreshold = 32 << 20;
  return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
#else
  return false;
#endif
}

}  // namespace ctrun::trainer
