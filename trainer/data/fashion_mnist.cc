#include "trainer/data/fashion_mnist.h"

#include <ATen/ATen.h>

#include "trainer/data/idx_file.h"

namespace ctrun::trainer {

Result<ImageDataset> LoadFashionMnist(const std::string& dir, const std::string& split,
                                      int64_t limit) {
  const std::string images_path = dir + "/" + split + "-images-idx3-ubyte.gz";
  const std::string labels_path = dir + "/" + split + "-labels-idx1-ubyte.gz";
  auto images = ReadIdxFile(images_path, limit);
  if (!images.ok()) return images.status();
  auto labels = ReadIdxFile(labels_path, limit);
  if (!labels.ok()) return labels.status();
  if (images->dims.size() != 3 || images->dims[1] != 28 || images->dims[2] != 28) {
    return Status::InvalidArgument("'" + images_path +
                                   "' does not hold 28x28 images; pass the Fashion-MNIST files");
  }
  if (labels->dims.size() != 1 || labels->file_rows != images->file_rows) {
    return Status::InvalidArgument("'" + labels_path + "' and '" + images_path +
                                   "' disagree on the sample count; pass a matching pair");
  }
  int64_t n = images->dims[0];
  if (limit > 0 && limit < n) n = limit;
  for (int64_t i = 0; i < n; ++i) {
    if (labels->data[static_cast<size_t>(i)] > 9) {
      return Status::InvalidArgument("'" + labels_path + "' has a label outside 0..9");
    }
  }
  ImageDataset out;
  at::Tensor raw = at::from_blob(images->data.data(), {n, 1, 28, 28}, at::kByte);
  out.images = raw.to(at::kFloat).div_(255.0).sub_(0.2860).div_(0.3530);
  out.labels = at::from_blob(labels->data.data(), {n}, at::kByte).to(at::kLong);
  return out;
}

}  // namespace ctrun::trainer
