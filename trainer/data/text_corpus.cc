#include "trainer/data/text_corpus.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace ctrun::trainer {

namespace fs = std::filesystem;

Result<TextCorpus> LoadTextCorpus(const std::string& path, int64_t min_tokens) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return Status::NotFound("--data '" + path + "': no such file or directory (give a text file or a directory of them)");
  }
  TextCorpus corpus;
  if (fs::is_directory(path, ec)) {
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      if (entry.is_regular_file() && !entry.is_symlink()) corpus.files.push_back(entry.path().string());
    }
    std::sort(corpus.files.begin(), corpus.files.end());
  } else {
    corpus.files.push_back(path);
  }
  std::vector<int64_t> bytes;
  for (const std::string& file : corpus.files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return Status::IOError("--data: cannot read '" + file + "'");
    for (auto it = std::istreambuf_iterator<char>(in); it != std::istreambuf_iterator<char>(); ++it) {
      const auto byte = static_cast<unsigned char>(*it);
      bytes.push_back(byte < kByteVocab ? byte : 0);
    }
  }
  if (static_cast<int64_t>(bytes.size()) < min_tokens) {
    return Status::InvalidArgument("--data '" + path + "': " + std::to_string(bytes.size()) + " bytes of text, need at least " +
                                   std::to_string(min_tokens) + " (give more text or a shorter --seq-len)");
  }
  corpus.tokens = at::tensor(bytes, at::kLong);
  return corpus;
}

TokenBatch SampleBatch(const TextCorpus& corpus, int64_t step, int64_t seed, int64_t batch, int64_t seq_len) {
  at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(seed) * 1000003ull + static_cast<uint64_t>(step));
  const int64_t span = corpus.tokens.numel() - seq_len - 1;
  at::Tensor offsets = at::randint(0, span, {batch, 1}, gen, at::kLong);
  at::Tensor index = offsets + at::arange(seq_len + 1, at::kLong).unsqueeze(0);
  at::Tensor windows = corpus.tokens.index_select(0, index.reshape({-1})).view({batch, seq_len + 1});
  return TokenBatch{windows.narrow(1, 0, seq_len).contiguous(), windows.narrow(1, 1, seq_len).contiguous()};
}

}  // namespace ctrun::trainer
