// FuzzInput: reads typed values from libFuzzer's byte string, for the
// fuzz targets in this folder. Reading past the end yields zeros, so every
// input decodes to some sequence; done() says when it is used up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ctrun::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool done() const { return pos_ >= size_; }

  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }

  uint16_t U16() { return static_cast<uint16_t>(Byte() | (Byte() << 8)); }

  // Up to `max` raw bytes (fewer at the end of the input).
  std::string Bytes(size_t max) {
    size_t n = std::min(max, size_ - std::min(pos_, size_));
    std::string out(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace ctrun::fuzz
