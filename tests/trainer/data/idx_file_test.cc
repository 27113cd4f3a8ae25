#include <catch2/catch.hpp>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "trainer/data/idx_file.h"

namespace ct = ctrun::trainer;

namespace {

// A temp file path unique to this test process.
std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("ctrun_idx_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

void WriteGz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  if (!bytes.empty()) REQUIRE(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())) > 0);
  gzclose(file);
}

std::vector<uint8_t> Header(std::vector<uint32_t> dims) {
  std::vector<uint8_t> out{0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    out.push_back(d >> 24);
    out.push_back((d >> 16) & 0xff);
    out.push_back((d >> 8) & 0xff);
    out.push_back(d & 0xff);
  }
  return out;
}

}  // namespace

TEST_CASE("ReadIdxFile reads dims and data") {
  auto bytes = Header({2, 3});
  for (uint8_t v = 0; v < 6; ++v) bytes.push_back(v * 10);
  const std::string path = TempPath("ok.gz");
  WriteGz(path, bytes);
  auto array = ct::ReadIdxFile(path);
  std::filesystem::remove(path);
  REQUIRE(array.ok());
  CHECK(array->dims == std::vector<int64_t>{2, 3});
  CHECK(array->data == std::vector<uint8_t>{0, 10, 20, 30, 40, 50});
}

TEST_CASE("ReadIdxFile reads only the first rows it is asked for") {
  auto bytes = Header({3, 2});
  for (uint8_t v = 0; v < 6; ++v) bytes.push_back(v);
  bytes.push_back(99);  // trailing: not reached when the rows are limited
  const std::string path = TempPath("rows.gz");
  WriteGz(path, bytes);
  auto two = ct::ReadIdxFile(path, 2);
  auto all = ct::ReadIdxFile(path, 5);
  std::filesystem::remove(path);
  REQUIRE(two.ok());
  CHECK(two->dims == std::vector<int64_t>{2, 2});
  CHECK(two->file_rows == 3);
  CHECK(two->data == std::vector<uint8_t>{0, 1, 2, 3});
  REQUIRE_FALSE(all.ok());  // more rows than the file: read in full, and checked in full
  CHECK(all.status().message().find("after the IDX data") != std::string::npos);
}

TEST_CASE("ReadIdxFile: missing file says how to get the dataset") {
  auto array = ct::ReadIdxFile("/nonexistent/train-images-idx3-ubyte.gz");
  REQUIRE_FALSE(array.ok());
  CHECK(array.status().IsNotFound());
  CHECK(array.status().message().find("dataset-fashion-mnist") != std::string::npos);
}

TEST_CASE("ReadIdxFile rejects bad magic, truncation and trailing bytes") {
  const std::string path = TempPath("bad.gz");
  SECTION("magic") {
    WriteGz(path, {0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0, 0});
    auto array = ct::ReadIdxFile(path);
    REQUIRE_FALSE(array.ok());
    CHECK(array.status().message().find("bad magic") != std::string::npos);
  }
  SECTION("truncated") {
    auto bytes = Header({4});
    bytes.push_back(1);
    WriteGz(path, bytes);
    auto array = ct::ReadIdxFile(path);
    REQUIRE_FALSE(array.ok());
    CHECK(array.status().message().find("truncated: 1 of 4") != std::string::npos);
  }
  SECTION("trailing") {
    auto bytes = Header({1});
    bytes.push_back(1);
    bytes.push_back(2);
    WriteGz(path, bytes);
    auto array = ct::ReadIdxFile(path);
    REQUIRE_FALSE(array.ok());
    CHECK(array.status().message().find("after the IDX data") != std::string::npos);
  }
  std::filesystem::remove(path);
}

TEST_CASE("ReadIdxFile reads the real Fashion-MNIST labels when installed") {
  const std::string path = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";
  if (!std::filesystem::exists(path)) return;
  auto array = ct::ReadIdxFile(path);
  REQUIRE(array.ok());
  CHECK(array->dims == std::vector<int64_t>{10000});
  CHECK(array->data[0] == 9);  // the first test image is an ankle boot
}
