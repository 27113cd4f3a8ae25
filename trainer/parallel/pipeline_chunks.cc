#include "trainer/parallel/pipeline_chunks.h"

#include <string>

namespace ctrun::trainer {

int VirtualStage(int stages, int stage, int chunk) { return chunk * stages + stage; }

PipeChunk ChunkOfVirtualStage(int stages, int virtual_stage) {
  return {virtual_stage % stages, virtual_stage / stages};
}

std::array<int, 2> ChunkLayers(int layers, int stages, int virtual_stages, int stage, int chunk) {
  const int total = stages * virtual_stages;
  const int index = VirtualStage(stages, stage, chunk);
  const int base = layers / total, extra = layers % total;
  const int first = index * base + (index < extra ? index : extra);
  return {first, first + base + (index < extra ? 1 : 0)};
}

int ActivationTag(int micro_batch, int boundary, int total_virtual_stages) {
  return 2 * (micro_batch * (total_virtual_stages - 1) + boundary);
}

int GradientTag(int micro_batch, int boundary, int total_virtual_stages) {
  return ActivationTag(micro_batch, boundary, total_virtual_stages) + 1;
}

std::string ChunkBlocksText(int layers, int stages, int virtual_stages, int stage) {
  std::string text;
  for (int chunk = 0; chunk < virtual_stages; ++chunk) {
    const auto range = ChunkLayers(layers, stages, virtual_stages, stage, chunk);
    if (!text.empty()) text += " + ";
    text += std::to_string(range[0]) + "-" + std::to_string(range[1] - 1);
  }
  return text;
}

}  // namespace ctrun::trainer
