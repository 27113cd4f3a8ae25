#include "launcher/process/cpu_binding.h"

#include <linux/mempolicy.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace ctrun::launcher {

namespace {
constexpr int kBitsPerWord = static_cast<int>(sizeof(unsigned long) * CHAR_BIT);

long SetMemPolicy(int mode, const unsigned long* mask, unsigned long words) {
  // maxnode counts one bit more than the mask holds (the kernel drops one).
  return ::syscall(SYS_set_mempolicy, mode, mask, words * kBitsPerWord + 1);
}
}  // namespace

PreparedBinding::PreparedBinding(const WorkerBinding& b) {
  if (!b.cpus.empty()) {
    const int n = std::max(*std::max_element(b.cpus.begin(), b.cpus.end()) + 1, CPU_SETSIZE);
    cpus_ = CPU_ALLOC(n);
    cpus_size_ = CPU_ALLOC_SIZE(n);
    if (cpus_ != nullptr) {
      CPU_ZERO_S(cpus_size_, cpus_);
      for (int c : b.cpus) CPU_SET_S(c, cpus_size_, cpus_);
    }
  }
  if (!b.memory_nodes.empty()) {
    const int top = *std::max_element(b.memory_nodes.begin(), b.memory_nodes.end());
    nodes_.assign(top / kBitsPerWord + 1, 0);
    for (int n : b.memory_nodes) nodes_[n / kBitsPerWord] |= 1UL << (n % kBitsPerWord);
    node_count_ = static_cast<int>(b.memory_nodes.size());
    first_node_ = *std::min_element(b.memory_nodes.begin(), b.memory_nodes.end());
  }
}

PreparedBinding::~PreparedBinding() {
  if (cpus_ != nullptr) CPU_FREE(cpus_);
}

int PreparedBinding::Apply(Step* step) const noexcept {
  *step = Step::kNone;
  if (cpus_ != nullptr && ::sched_setaffinity(0, cpus_size_, cpus_) != 0) {
    *step = Step::kCpus;
    return errno;
  }
  if (nodes_.empty()) return 0;
  if (node_count_ == 1) {
    if (SetMemPolicy(MPOL_PREFERRED, nodes_.data(), nodes_.size()) == 0) return 0;
  } else {
    if (SetMemPolicy(MPOL_PREFERRED_MANY, nodes_.data(), nodes_.size()) == 0) return 0;
    if (errno == EINVAL) {  // a kernel before 5.15: prefer the first node alone
      unsigned long one[64] = {};
      const int words = first_node_ / kBitsPerWord + 1;
      if (words <= 64) {
        one[first_node_ / kBitsPerWord] = 1UL << (first_node_ % kBitsPerWord);
        if (SetMemPolicy(MPOL_PREFERRED, one, static_cast<unsigned long>(words)) == 0) return 0;
      }
    }
  }
  *step = Step::kMemory;
  return errno;
}

std::string MemoryPolicyUnavailable() {
  int mode = 0;
  if (::syscall(SYS_get_mempolicy, &mode, nullptr, 0UL, nullptr, 0UL) == 0) return "";
  const int err = errno;
  std::string why = std::string("the kernel refuses NUMA memory policies (") + std::strerror(err) + ")";
  if (err == EPERM) why += "; a container needs CAP_SYS_NICE for them";
  return why;
}

}  // namespace ctrun::launcher
