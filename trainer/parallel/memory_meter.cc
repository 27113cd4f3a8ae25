#include "trainer/parallel/memory_meter.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace ctrun::trainer {
namespace {

std::atomic<int64_t> current{0};
std::atomic<int64_t> peak{0};

void Add(int64_t bytes) {
  const int64_t now = current.fetch_add(bytes) + bytes;
  int64_t seen = peak.load();
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
}

// Each allocation's context is its data pointer (libtorch's raw_allocate
// requires that), so the wrapped allocator's DataPtr lives in a table.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t bytes) const override {
    c10::DataPtr inner = inner_->allocate(bytes);
    void* data = inner.get();
    const c10::Device device = inner.device();
    if (data == nullptr) return inner;  // zero bytes: nothing to count
    {
      std::lock_guard<std::mutex> lock(mutex());
      blocks().emplace(data, Block{std::move(inner), static_cast<int64_t>(bytes)});
    }
    Add(static_cast<int64_t>(bytes));
    return c10::DataPtr(data, data, &Free, device);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &Free; }

 private:
  struct Block {
    c10::DataPtr inner;  // frees the memory with the wrapped allocator's deleter
    int64_t bytes;
  };
  static void Free(void* data) {
    Block block;
    {
      std::lock_guard<std::mutex> lock(mutex());
      auto it = blocks().find(data);
      if (it == blocks().end()) return;
      block = std::move(it->second);
      blocks().erase(it);
    }
    current.fetch_sub(block.bytes);
  }

  // Never destroyed: tensors may be freed during static destruction.
  static std::mutex& mutex() {
    static auto* m = new std::mutex;
    return *m;
  }
  static std::unordered_map<void*, Block>& blocks() {
    static auto* b = new std::unordered_map<void*, Block>;
    return *b;
  }

  c10::Allocator* inner_;
};

}  // namespace

void TensorMemoryMeter::Install() {
  static CountingAllocator* installed = [] {
    auto* allocator = new CountingAllocator(c10::GetCPUAllocator());  // lives for the process
    c10::SetCPUAllocator(allocator, /*priority=*/100);
    return allocator;
  }();
  (void)installed;
}

int64_t TensorMemoryMeter::CurrentBytes() { return current.load(); }
int64_t TensorMemoryMeter::PeakBytes() { return peak.load(); }
void TensorMemoryMeter::ResetPeak() { peak.store(current.load()); }

}  // namespace ctrun::trainer
