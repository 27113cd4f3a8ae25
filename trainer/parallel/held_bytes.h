// HeldBytes: how many bytes are held now, and the most held at once since
// the last ResetPeak (FSDP's gathered units and gradient buffers).
//
// Bytes are held through a Lease: Hold() adds them and returns the Lease,
// which gives them back exactly once, on Release() or destruction. Each
// allocation's bytes are therefore added and taken back in one place, and
// cannot be taken back twice or forgotten.
//
// A HeldBytes may have a total: another HeldBytes that every Hold and
// release also counts, so the total's peak is the most held at once over
// all its parts (not the sum of their separate peaks).
//
// Lifetimes: a HeldBytes must outlive every Lease it made, and its total
// must outlive it. Neither is copyable; a Lease moves. Thread model: one
// thread.
#pragma once

#include <cstdint>

namespace ctrun::trainer {

class HeldBytes {
 public:
  class Lease {
   public:
    Lease() = default;  // holds nothing
    Lease(Lease&& other) noexcept;
    // Releases what this lease held, then takes over `other`'s bytes.
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { Release(); }

    // Gives the bytes back to the HeldBytes; afterwards the lease holds
    // nothing. No-op when it holds nothing.
    void Release();
    bool held() const { return owner_ != nullptr; }

   private:
    friend class HeldBytes;
    Lease(HeldBytes* owner, int64_t bytes) : owner_(owner), bytes_(bytes) {}

    HeldBytes* owner_ = nullptr;
    int64_t bytes_ = 0;
  };

  HeldBytes() = default;
  // Counts every hold in `total` too (nullptr: no total).
  explicit HeldBytes(HeldBytes* total) : total_(total) {}
  HeldBytes(const HeldBytes&) = delete;
  HeldBytes& operator=(const HeldBytes&) = delete;

  // Adds `bytes` (>= 0) to current() (and the total's), raises peak() to it,
  // and returns the lease that takes them back.
  [[nodiscard]] Lease Hold(int64_t bytes);

  int64_t current() const { return current_; }
  int64_t peak() const { return peak_; }
  // The peak restarts from what is held now.
  void ResetPeak() { peak_ = current_; }

 private:
  void Add(int64_t bytes);

  HeldBytes* total_ = nullptr;
  int64_t current_ = 0;
  int64_t peak_ = 0;
};

}  // namespace ctrun::trainer
