// IdxArray: an array read from a gzip-compressed IDX file (the MNIST /
// Fashion-MNIST format: big-endian magic 0x0000 <type> <ndims>, the
// dimensions as big-endian uint32, then the row-major data).
//
// Only unsigned-byte data (type 0x08) is supported, which is what the
// (Fashion-)MNIST files hold. No torch; plain data, copyable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace ctrun::trainer {

struct IdxArray {
  std::vector<int64_t> dims;     // e.g. {60000, 28, 28}; dims[0]: the rows read
  std::vector<uint8_t> data;     // product(dims) bytes, row-major
  int64_t file_rows = 0;         // the file's own first dimension (60000)
};

// Reads and decompresses `path` (gzip, or plain: zlib reads both): all of
// it, or with max_rows > 0 only the first max_rows rows (of the first
// dimension), so a run that trains on a few samples does not decompress
// the rest (the rows not read are not checked). Returns the array, or:
//  - NotFound when the file does not exist (the message names it and says
//    to install dataset-fashion-mnist or pass the right --data-dir);
//  - InvalidArgument when the header is not IDX unsigned-byte, or the data
//    is shorter than the dimensions promise, or (read in full) longer
//    (trailing bytes);
//  - IOError when the file cannot be opened or decompressed.
Result<IdxArray> ReadIdxFile(const std::string& path, int64_t max_rows = 0);

}  // namespace ctrun::trainer
