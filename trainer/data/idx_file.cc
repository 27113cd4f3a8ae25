#include "trainer/data/idx_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <sys/stat.h>

namespace ctrun::trainer {
namespace {

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Reads exactly `size` bytes; returns how many were read, or -1 on error.
int64_t ReadFully(gzFile file, uint8_t* out, int64_t size) {
  int64_t done = 0;
  while (done < size) {
    const int64_t chunk = std::min<int64_t>(size - done, 1 << 30);
    const int got = gzread(file, out + done, static_cast<unsigned>(chunk));
    if (got < 0) return -1;
    if (got == 0) break;
    done += got;
  }
  return done;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

Result<IdxArray> ReadIdxFile(const std::string& path, int64_t max_rows) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    return Status::NotFound("dataset file '" + path +
                            "' not found: install dataset-fashion-mnist "
                            "(apt-get install dataset-fashion-mnist) or pass --data-dir");
  }
  GzFile file(gzopen(path.c_str(), "rb"));
  if (!file) {
    return Status::IOError("cannot open '" + path + "': " + std::strerror(errno));
  }
  uint8_t header[4];
  if (ReadFully(file.get(), header, 4) != 4 || header[0] != 0 || header[1] != 0 ||
      header[2] != 0x08 || header[3] == 0 || header[3] > 8) {
    return Status::InvalidArgument("'" + path +
                                   "' is not an unsigned-byte IDX file (bad magic); "
                                   "pass the original (Fashion-)MNIST .gz files");
  }
  IdxArray out;
  int64_t count = 1;
  for (int i = 0; i < header[3]; ++i) {
    uint8_t dim[4];
    if (ReadFully(file.get(), dim, 4) != 4) {
      return Status::InvalidArgument("'" + path + "' is truncated inside its IDX header");
    }
    out.dims.push_back(BigEndian32(dim));
    count *= out.dims.back();
    if (count > (int64_t{1} << 36)) {
      return Status::InvalidArgument("'" + path + "' declares an implausibly large array");
    }
  }
  out.file_rows = out.dims[0];
  const bool partial = max_rows > 0 && max_rows < out.dims[0];
  if (partial) {
    count = count / out.dims[0] * max_rows;  // a row's bytes x the rows read
    out.dims[0] = max_rows;
  }
  out.data.resize(static_cast<size_t>(count));
  const int64_t got = ReadFully(file.get(), out.data.data(), count);
  if (got < 0) {
    int err = 0;
    return Status::IOError("cannot decompress '" + path + "': " + gzerror(file.get(), &err));
  }
  if (got != count) {
    return Status::InvalidArgument("'" + path + "' is truncated: " + std::to_string(got) +
                                   " of " + std::to_string(count) + " data bytes");
  }
  uint8_t extra;
  if (!partial && ReadFully(file.get(), &extra, 1) != 0) {
    return Status::InvalidArgument("'" + path + "' has bytes after the IDX data");
  }
  return out;
}

}  // namespace ctrun::trainer
