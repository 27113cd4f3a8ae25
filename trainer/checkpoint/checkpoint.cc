#include "trainer/checkpoint/checkpoint.h"

#include "trainer/checkpoint/archive_file.h"
#include "trainer/comm/torch_error.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

namespace ctrun::trainer {
namespace {

constexpr const char* kMagic = "ctrun-checkpoint 1";

uint32_t Crc32(const std::string& bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  size_t done = 0;
  while (done < bytes.size()) {
    const size_t chunk = std::min<size_t>(bytes.size() - done, 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + done), static_cast<uInt>(chunk));
    done += chunk;
  }
  return static_cast<uint32_t>(crc);
}

Status WriteAllAndSync(const std::string& path, const std::string& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::IOError("cannot write checkpoint '" + path + "': " + std::strerror(errno) +
                           " (check --checkpoint-dir exists and is writable)");
  }
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      return Status::IOError("cannot write checkpoint '" + path + "': " + std::strerror(err) +
                             " (disk full?)");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    return Status::IOError("cannot flush checkpoint '" + path + "': " + std::strerror(errno));
  }
  return Status::Ok();
}

void FsyncDir(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

Status Corrupt(const std::string& path, const std::string& why) {
  return Status::InvalidArgument("checkpoint '" + path + "' is corrupt (" + why +
                                 "); delete it to start fresh or restore a good copy");
}

Status Mismatch(const std::string& path, const std::string& why) {
  return Status::InvalidArgument("checkpoint '" + path + "' does not match this model (" + why +
                                 "); use another --checkpoint-dir or the model it was saved from");
}

std::string ShapeText(const at::Tensor& t) {
  std::string out = "[";
  for (int64_t i = 0; i < t.dim(); ++i) out += (i ? "," : "") + std::to_string(t.size(i));
  return out + "]";
}

}  // namespace

Status SaveCheckpoint(const std::string& path, torch::nn::Module& module,
                      torch::optim::Optimizer& optimizer, const TrainPosition& position) {
  std::string payload;
  try {
    torch::serialize::OutputArchive archive;
    int64_t count = 0;
    for (const auto& item : module.named_parameters(true)) {
      archive.write("model/" + item.key(), item.value().detach().cpu());
      ++count;
    }
    for (const auto& item : module.named_buffers(true)) {
      archive.write("model/" + item.key(), item.value().cpu(), /*is_buffer=*/true);
      ++count;
    }
    torch::serialize::OutputArchive optim_archive;
    optimizer.save(optim_archive);
    archive.write("optim", optim_archive);
    archive.write("meta/tensor_count", CounterTensor(count));
    archive.write("meta/step", CounterTensor(position.step));
    archive.write("meta/epoch", CounterTensor(position.epoch));
    archive.write("meta/epoch_consumed", CounterTensor(position.epoch_consumed));
    archive.write("meta/world_size", CounterTensor(position.world_size));
    archive.write("meta/seed", CounterTensor(position.seed));
    std::ostringstream stream;
    archive.save_to(stream);
    payload = std::move(stream).str();
  } catch (const std::exception& error) {
    return Status::IOError("cannot serialize checkpoint '" + path + "': " + TorchErrorLine(error));
  }
  const std::string header = std::string(kMagic) + " " + std::to_string(payload.size()) + " " +
                             std::to_string(Crc32(payload)) + "\n";
  const std::string tmp = path + ".tmp";
  CTRUN_RETURN_IF_ERROR(WriteAllAndSync(tmp, header + payload));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::IOError("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
  }
  FsyncDir(path);
  return Status::Ok();
}

namespace {

// The payload of the checkpoint file at `path`, its header, length and CRC
// checked. IOError when it cannot be opened, Corrupt otherwise.
Result<std::string> ReadPayload(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return Status::IOError("cannot read checkpoint '" + path + "': " + std::strerror(errno));
  }
  std::string header;
  std::getline(file, header);
  std::istringstream fields(header);
  std::string word1;
  int version = 0;
  size_t size = 0;
  uint32_t crc = 0;
  if (!(fields >> word1 >> version >> size >> crc) || word1 + " " + std::to_string(version) != kMagic) {
    return Corrupt(path, "no ctrun checkpoint header");
  }
  std::string payload(size, '\0');
  file.read(payload.data(), static_cast<std::streamsize>(size));
  if (static_cast<size_t>(file.gcount()) != size) {
    return Corrupt(path, "truncated: " + std::to_string(file.gcount()) + " of " +
                             std::to_string(size) + " bytes");
  }
  if (file.peek() != std::char_traits<char>::eof()) return Corrupt(path, "trailing bytes");
  if (Crc32(payload) != crc) return Corrupt(path, "CRC mismatch");
  return payload;
}

// The training position and the model tensor count in `archive`'s meta/
// entries. Corrupt when one is missing; throws what the archive throws.
Status ReadPosition(torch::serialize::InputArchive& archive, const std::string& path,
                    TrainPosition& position, int64_t& count) {
  auto read_meta = [&](const std::string& key, int64_t& out) {
    at::Tensor value;
    if (!archive.try_read("meta/" + key, value)) return false;
    out = value.item<int64_t>();
    return true;
  };
  if (!read_meta("tensor_count", count) || !read_meta("step", position.step) ||
      !read_meta("epoch", position.epoch) || !read_meta("epoch_consumed", position.epoch_consumed) ||
      !read_meta("world_size", position.world_size) || !read_meta("seed", position.seed)) {
    return Corrupt(path, "training position missing");
  }
  return Status::Ok();
}

// Reads `module`'s parameters and buffers from `archive` into `incoming`
// (by name), checking each one's shape and dtype, and that the file holds
// `count` of them. Mismatch otherwise; throws what the archive throws.
Status ReadModelTensors(torch::serialize::InputArchive& archive, const std::string& path,
                        torch::nn::Module& module, int64_t count, std::map<std::string, at::Tensor>& incoming) {
  int64_t expected = 0;
  auto check = [&](const std::string& name, const at::Tensor& mine, bool is_buffer) -> Status {
    ++expected;
    at::Tensor theirs;
    if (!archive.try_read("model/" + name, theirs, is_buffer)) {
      return Mismatch(path, "'" + name + "' is missing");
    }
    if (theirs.sizes() != mine.sizes() || theirs.scalar_type() != mine.scalar_type()) {
      return Mismatch(path, "'" + name + "' is " + ShapeText(theirs) + " " +
                                std::string(c10::toString(theirs.scalar_type())) + " in the file, " +
                                ShapeText(mine) + " " + std::string(c10::toString(mine.scalar_type())) +
                                " in the model");
    }
    incoming[name] = theirs;
    return Status::Ok();
  };
  for (const auto& item : module.named_parameters(true)) {
    CTRUN_RETURN_IF_ERROR(check(item.key(), item.value(), false));
  }
  for (const auto& item : module.named_buffers(true)) {
    CTRUN_RETURN_IF_ERROR(check(item.key(), item.value(), true));
  }
  if (count != expected) {
    return Mismatch(path, std::to_string(count) + " tensors in the file, " +
                              std::to_string(expected) + " in the model");
  }
  return Status::Ok();
}

}  // namespace

Result<std::optional<TrainPosition>> LoadCheckpoint(const std::string& path,
                                                    torch::nn::Module& module,
                                                    torch::optim::Optimizer& optimizer) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<TrainPosition>();
  auto payload = ReadPayload(path);
  if (!payload.ok()) return payload.status();

  TrainPosition position;
  std::map<std::string, at::Tensor> incoming;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(payload->data(), payload->size());
    int64_t count = 0;
    CTRUN_RETURN_IF_ERROR(ReadPosition(archive, path, position, count));
    CTRUN_RETURN_IF_ERROR(ReadModelTensors(archive, path, module, count, incoming));
    torch::serialize::InputArchive optim_archive;
    if (!archive.try_read("optim", optim_archive)) return Corrupt(path, "optimizer state missing");
    try {
      optimizer.load(optim_archive);
    } catch (const std::exception& error) {
      return Mismatch(path, "optimizer state: " + TorchErrorLine(error));
    }
  } catch (const std::exception& error) {
    return Corrupt(path, TorchErrorLine(error));
  }

  at::NoGradGuard no_grad;
  for (const auto& item : module.named_parameters(true)) {
    item.value().copy_(incoming[item.key()]);
  }
  for (const auto& item : module.named_buffers(true)) {
    item.value().copy_(incoming[item.key()]);
  }
  return std::optional<TrainPosition>(position);
}

}  // namespace ctrun::trainer
