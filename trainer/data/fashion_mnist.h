// Fashion-MNIST as tensors, read from the IDX files of Debian's
// dataset-fashion-mnist (default dir /usr/share/datasets/fashion-mnist).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "base/result.h"

namespace ctrun::trainer {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct ImageDataset {
  at::Tensor images;  // [N, 1, 28, 28] float32, (x/255 - 0.2860) / 0.3530
  at::Tensor labels;  // [N] int64 in 0..9
  int64_t size() const { return labels.size(0); }
};

// Loads split "train" or "t10k" from `dir` (<split>-images-idx3-ubyte.gz and
// <split>-labels-idx1-ubyte.gz), keeping the first `limit` samples when
// limit > 0. Returns the dataset, or NotFound (a file is missing: the
// message says to install dataset-fashion-mnist or pass --data-dir),
// InvalidArgument (not 28x28 images, labels out of 0..9, or the counts of
// images and labels differ) or IOError.
Result<ImageDataset> LoadFashionMnist(const std::string& dir, const std::string& split,
                                      int64_t limit = 0);

}  // namespace ctrun::trainer
