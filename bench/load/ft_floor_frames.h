// ft_floor_load's frames, what its clients and server speak (see
// ft_floor_load.cc).
//
// A frame: a 4-byte little-endian payload length, then the payload; a
// payload starts with the step it belongs to (8 bytes, little-endian),
// then filler up to its size. Payloads are kStepBytes..kMaxPayload bytes.
// Plain functions; no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ft_floor_load {

constexpr size_t kMaxPayload = 4096;
constexpr size_t kStepBytes = 8;

// Appends the frame of `step` with a payload of `bytes` (kStepBytes..
// kMaxPayload).
void AppendFrame(std::string& out, int64_t step, size_t bytes);

// The next whole frame in in[*off..]: its step, and *off moved past it.
// Returns 0 when none is whole yet (*off unchanged), 1 for a frame, -1 for
// a malformed one (a length out of kStepBytes..kMaxPayload).
int NextFrame(std::string_view in, size_t* off, int64_t* step);

}  // namespace ft_floor_load
