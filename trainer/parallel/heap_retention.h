// RetainFreedHeap: makes this process's malloc keep the memory that freed
// tensors return, for the next tensors of the same sizes, instead of giving
// it back to the kernel and faulting fresh zeroed pages in again.
//
// Why: libtorch's CPU allocator is plain malloc. glibc's defaults serve
// blocks above a dynamic threshold with mmap and trim the heap's free top
// above twice that threshold, so a training step that frees and remakes
// many-MiB tensors (backward's temporaries; under activation recomputation
// (recompute.h) each block's recomputed activations, once per block) maps
// and unmaps them over and over: every 4 KiB page faults and is zeroed by
// the kernel again. On a 2-core VM that cost ~0.15 CPU s a step (of 1.5) on
// bench/recompute.sh's GPT with --recompute selective.
//
// Guarantees: after the call, blocks under 32 MiB come from malloc's heap
// and freed heap memory stays mapped (resident at the high-water mark, as a
// caching allocator keeps it); blocks of 32 MiB and more are still mapped
// and unmapped whole. Values are untouched: only where memory comes from
// changes. Returns false (and changes nothing) where malloc is not glibc's
// or refuses a setting. Call once, early, on main's thread.
#pragma once

namespace ctrun::trainer {

bool RetainFreedHeap();

}  // namespace ctrun::trainer
