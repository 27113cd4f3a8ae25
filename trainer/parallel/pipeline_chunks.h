// Pipeline chunks: the bookkeeping of a pipeline whose stages each hold v
// model chunks (interleaved 1F1B, pipeline_schedule.h), Megatron-LM's
// assignment: the model's layers are cut into p*v consecutive "virtual
// stages", and chunk c of stage s is virtual stage c*p + s. So stage 0
// holds virtual stages 0, p, 2p, ...; an activation leaves the last stage's
// chunk c for stage 0's chunk c+1 (the wrap-around), and its gradient comes
// back the same way. With v == 1 this is the plain pipeline: stage s is
// virtual stage s.
//
// The point-to-point tags: a micro-batch's activation crossing the
// boundary between virtual stages e and e+1 and its gradient crossing back
// each have their own tag, distinct for every (micro-batch, boundary,
// direction), so no two messages of a step share one, whichever pair of
// ranks they travel between.
//
// Pure functions of integers; no torch, no I/O; thread-safe.
#pragma once

#include <array>
#include <string>

namespace ctrun::trainer {

struct PipeChunk {
  int stage = 0;  // the pipeline rank that runs it
  int chunk = 0;  // which of that rank's chunks
  bool operator==(const PipeChunk&) const = default;
};

// Virtual stage c*p + s. Requires 0 <= stage < stages, chunk >= 0.
int VirtualStage(int stages, int stage, int chunk);
// The (stage, chunk) that runs `virtual_stage` (>= 0) in a pipeline of
// `stages` ranks.
PipeChunk ChunkOfVirtualStage(int stages, int virtual_stage);

// Layers [first, last) of chunk `chunk` of `stage` when `layers` are cut by
// count into stages*virtual_stages virtual stages (the first layers % (p*v)
// virtual stages get one more).
std::array<int, 2> ChunkLayers(int layers, int stages, int virtual_stages, int stage, int chunk);

// The tag of micro-batch `micro_batch`'s activation sent from virtual stage
// `boundary` to `boundary`+1, and of its gradient sent from `boundary`+1
// back to `boundary`, in a pipeline of `total_virtual_stages` (p*v).
// Requires 0 <= boundary < total_virtual_stages - 1, micro_batch >= 0.
int ActivationTag(int micro_batch, int boundary, int total_virtual_stages);
int GradientTag(int micro_batch, int boundary, int total_virtual_stages);

// "0-1" or "0-1 + 4-5": the blocks of each of `stage`'s chunks, for the
// layout table.
std::string ChunkBlocksText(int layers, int stages, int virtual_stages, int stage);

}  // namespace ctrun::trainer
