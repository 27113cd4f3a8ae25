// The example programs' exit codes (ctrun-fashion-mnist, ctrun-gpt), as
// docs/trainer.md documents them: 0 done (or saved on a preemption notice),
// 1 a failed run (one line on stderr and in the error file; also a
// preemption notice with nothing to save to), 2 a usage error (a bad flag,
// a mesh or environment the flags cannot run on). Constants only.
#pragma once

namespace ctrun::trainer {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

}  // namespace ctrun::trainer
