#include "rendezvous/grpc/server/checked_mutex.h"

#include <cstdio>
#include <cstdlib>

namespace ctrun::rdzv {

void CheckedMutex::AssertHeld(const char* who) const {
  if (owner_.load(std::memory_order_relaxed) == std::this_thread::get_id()) return;
  std::fprintf(stderr, "ctrun: internal error: %s called without the rendezvous server's lock\n", who);
  std::abort();
}

}  // namespace ctrun::rdzv
