// RetainFreedHeap (trainer/parallel/heap_retention.h): glibc takes the
// settings, and allocation works as before after them.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>

#include "trainer/parallel/heap_retention.h"

namespace ct = ctrun::trainer;

TEST_CASE("RetainFreedHeap: glibc's malloc takes the settings; memory still works after") {
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
  CHECK(ct::RetainFreedHeap());
#else
  (void)ct::RetainFreedHeap();  // another malloc (or ASan's): refused, nothing changed
#endif
  for (size_t bytes : {size_t{1} << 20, size_t{8} << 20, size_t{40} << 20}) {  // heap, heap, mmap
    auto* block = static_cast<unsigned char*>(std::malloc(bytes));
    REQUIRE(block != nullptr);
    std::memset(block, 0xab, bytes);
    CHECK(block[bytes - 1] == 0xab);
    std::free(block);
  }
}
