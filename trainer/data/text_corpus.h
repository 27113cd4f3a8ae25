// TextCorpus: a byte-level corpus from text files on the machine, and the
// language-model batches drawn from it.
//
// Tokens are bytes 0..127 (ASCII; other bytes map to 0), so the vocabulary
// is 128 and needs no tokenizer file. Batches are a pure function of (seed,
// step): every rank, layout and restart draws the same global batch for a
// step, which is what makes layouts comparable and resumes exact.
//
// Copyable (the tokens are shared, read-only). No thread-safety concerns.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "base/result.h"

namespace ctrun::trainer {

// The default corpus: the license texts every Debian system ships.
inline constexpr const char* kDefaultCorpusDir = "/usr/share/common-licenses";
inline constexpr int64_t kByteVocab = 128;

struct TextCorpus {
  at::Tensor tokens;  // int64 [N]
  std::vector<std::string> files;
};

// Reads every regular file under `path` (a file, or a directory read in
// name order, not recursing into symlinked duplicates). Returns the corpus,
// or NotFound / IOError naming the path, or InvalidArgument when it holds
// fewer than `min_tokens` bytes.
Result<TextCorpus> LoadTextCorpus(const std::string& path, int64_t min_tokens);

struct TokenBatch {
  at::Tensor tokens;   // int64 [batch, seq_len]
  at::Tensor targets;  // the next token of each: tokens shifted by one
};

// The global batch of `step`: `batch` windows of seq_len + 1 bytes at
// offsets drawn from a generator seeded by (seed, step).
TokenBatch SampleBatch(const TextCorpus& corpus, int64_t step, int64_t seed, int64_t batch, int64_t seq_len);

}  // namespace ctrun::trainer
