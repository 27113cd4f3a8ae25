#include "trainer/parallel/memory_meter.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstring>
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
struct Block {
  c10::DataPtr inner;  // frees the memory with the wrapped allocator's deleter
  int64_t bytes;
};

// Never destroyed: tensors may be freed during static destruction.
std::mutex& BlocksMutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_map<void*, Block>& Blocks() {
  static auto* b = new std::unordered_map<void*, Block>;
  return *b;
}

void Free(void* data) {
  Block block;
  {
    std::lock_guard<std::mutex> lock(BlocksMutex());
    auto it = Blocks().find(data);
    if (it == Blocks().end()) return;
    block = std::move(it->second);
    Blocks().erase(it);
  }
  current.fetch_sub(block.bytes);
}

c10::DataPtr CountedAllocate(c10::Allocator* inner_allocator, size_t bytes) {
  c10::DataPtr inner = inner_allocator->allocate(bytes);
  void* data = inner.get();
  const c10::Device device = inner.device();
  if (data == nullptr) return inner;  // zero bytes: nothing to count
  {
    std::lock_guard<std::mutex> lock(BlocksMutex());
    Blocks().emplace(data, Block{std::move(inner), static_cast<int64_t>(bytes)});
  }
  Add(static_cast<int64_t>(bytes));
  return c10::DataPtr(data, data, &Free, device);
}

// c10::Allocator::allocate() is const in torch 1.x and 2.0-2.2; from 2.3 it
// is not, and copy_data() is pure virtual beside it. The allocator is a
// template over its base so that only the matching definition is compiled.
template <typename A>
concept HasConstAllocate = requires(const A& a) { a.allocate(size_t{1}); };
constexpr bool kConstAllocate = HasConstAllocate<c10::Allocator>;

template <typename Base, bool kConst>
class CountingAllocator;

template <typename Base>
class CountingAllocator<Base, true> final : public Base {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}
  c10::DataPtr allocate(size_t bytes) const override { return CountedAllocate(inner_, bytes); }
  c10::DeleterFnPtr raw_deleter() const override { return &Free; }

 private:
  c10::Allocator* inner_;
};

template <typename Base>
class CountingAllocator<Base, false> final : public Base {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}
  c10::DataPtr allocate(size_t bytes) override { return CountedAllocate(inner_, bytes); }
  c10::DeleterFnPtr raw_deleter() const override { return &Free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count > 0) std::memcpy(dest, src, count);  // CPU memory only
  }

 private:
  c10::Allocator* inner_;
};

using CpuCountingAllocator = CountingAllocator<c10::Allocator, kConstAllocate>;

}  // namespace

void TensorMemoryMeter::Install() {
  static CpuCountingAllocator* installed = [] {
    auto* allocator = new CpuCountingAllocator(c10::GetCPUAllocator());  // lives for the process
    c10::SetCPUAllocator(allocator, /*priority=*/100);
    return allocator;
  }();
  (void)installed;
}

int64_t TensorMemoryMeter::CurrentBytes() { return current.load(); }
int64_t TensorMemoryMeter::PeakBytes() { return peak.load(); }
void TensorMemoryMeter::ResetPeak() { peak.store(current.load()); }

}  // namespace ctrun::trainer
