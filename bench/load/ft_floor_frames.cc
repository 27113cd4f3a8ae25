// ft_floor_load's frames: see ft_floor_load.h.
#include "ft_floor_frames.h"

namespace ft_floor_load {
namespace {

void PutLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLe(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return v;
}

}  // namespace

void AppendFrame(std::string& out, int64_t step, size_t bytes) {
  PutLe(out, bytes, 4);
  PutLe(out, static_cast<uint64_t>(step), kStepBytes);
  out.append(bytes - kStepBytes, 'x');
}

int NextFrame(std::string_view in, size_t* off, int64_t* step) {
  if (in.size() - *off < 4) return 0;
  const uint64_t len = GetLe(in, *off, 4);
  if (len < kStepBytes || len > kMaxPayload) return -1;
  if (in.size() - *off - 4 < len) return 0;
  *step = static_cast<int64_t>(GetLe(in, *off + 4, kStepBytes));
  *off += 4 + len;
  return 1;
}

}  // namespace ft_floor_load
