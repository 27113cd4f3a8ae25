// TensorMemoryMeter: counts the bytes of CPU tensor storage alive in this
// process, and the most alive at once, by wrapping libtorch's CPU allocator
// (c10::SetCPUAllocator). CPU libtorch keeps no such statistics itself
// (torch.cuda.max_memory_allocated has no CPU counterpart in 1.13).
//
// Install() once, before the tensors to be counted are made; storage made
// earlier is not counted (nor subtracted when freed). Thread-safe (atomic
// counters): Gloo and intra-op threads allocate too.
#pragma once

#include <cstdint>

namespace ctrun::trainer {

class TensorMemoryMeter {
 public:
  // Wraps the current CPU allocator; later calls do nothing.
  static void Install();
  static int64_t CurrentBytes();
  static int64_t PeakBytes();
  // Sets the peak to the current bytes.
  static void ResetPeak();
};

}  // namespace ctrun::trainer
