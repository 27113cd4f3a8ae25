#include "trainer/checkpoint/archive_file.h"

#include <ATen/ATen.h>
#include <torch/serialize/output-archive.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "trainer/comm/torch_error.h"

namespace ctrun::trainer {

Status SaveArchiveAtomically(torch::serialize::OutputArchive& archive, const std::string& path) {
  const std::string tmp = path + ".tmp";
  try {
    archive.save_to(tmp);
  } catch (const std::exception& error) {
    return Status::IOError("cannot write checkpoint file '" + tmp + "': " + TorchErrorLine(error) +
                           " (check the directory exists and is writable)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::IOError("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
  }
  return Status::Ok();
}

at::Tensor CounterTensor(int64_t value) { return at::scalar_tensor(value, at::kLong); }

}  // namespace ctrun::trainer
