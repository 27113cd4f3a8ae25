// StorageBytes: the bytes of tensor storage behind `tensors`, each storage
// counted once however many tensors view it (undefined tensors count 0).
// What the benchmarks' state and peak byte figures add up: parameters,
// gradients (DDP's live in its buckets: counted once), optimizer state.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ctrun::trainer {

int64_t StorageBytes(const std::vector<at::Tensor>& tensors);

}  // namespace ctrun::trainer
