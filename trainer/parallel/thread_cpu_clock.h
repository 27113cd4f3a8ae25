// ThreadCpuSeconds: the CPU time (user + system) the calling thread has used,
// in seconds, from CLOCK_THREAD_CPUTIME_ID. Differences of two readings on
// the same thread measure its work while other processes share the cores,
// where wall time also counts the time it waited for a core. With one
// intra-op thread (--threads 1) a CPU training step's forward, backward and
// any recomputation all run on the caller's thread (libtorch's autograd
// runs CPU work on the thread that called backward), so this clock sees all
// of the step's compute. Never fails (0 if the clock cannot be read).
#pragma once

namespace ctrun::trainer {

double ThreadCpuSeconds();

}  // namespace ctrun::trainer
