#include "trainer/parallel/storage_bytes.h"

#include <set>

namespace ctrun::trainer {

int64_t StorageBytes(const std::vector<at::Tensor>& tensors) {
  std::set<const void*> seen;
  int64_t total = 0;
  for (const auto& t : tensors) {
    if (t.defined() && seen.insert(t.storage().data()).second) total += static_cast<int64_t>(t.storage().nbytes());
  }
  return total;
}

}  // namespace ctrun::trainer
