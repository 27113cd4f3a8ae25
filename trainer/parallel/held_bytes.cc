#include "trainer/parallel/held_bytes.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace ctrun::trainer {

HeldBytes::Lease::Lease(Lease&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

HeldBytes::Lease& HeldBytes::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = std::exchange(other.owner_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void HeldBytes::Lease::Release() {
  if (owner_ == nullptr) return;
  owner_->Add(-bytes_);
  owner_ = nullptr;
  bytes_ = 0;
}

HeldBytes::Lease HeldBytes::Hold(int64_t bytes) {
  assert(bytes >= 0);
  Add(bytes);
  return Lease(this, bytes);
}

void HeldBytes::Add(int64_t bytes) {
  current_ += bytes;
  peak_ = std::max(peak_, current_);
  if (total_ != nullptr) total_->Add(bytes);
}

}  // namespace ctrun::trainer
