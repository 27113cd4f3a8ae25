#include "trainer/ft/state_dump.h"

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <fstream>

#include "trainer/checkpoint/optimizer_state.h"

namespace ctrun::trainer::ft {
namespace {

void WriteFloats(std::ofstream& out, const at::Tensor& t) {
  at::Tensor flat = t.detach().to(at::kCPU, at::kFloat).contiguous().reshape({-1});
  out.write(reinterpret_cast<const char*>(flat.data_ptr<float>()),
            static_cast<std::streamsize>(flat.numel() * sizeof(float)));
}

}  // namespace

Status DumpFtState(const std::string& path, const std::vector<at::Tensor>& params,
                   const torch::optim::Optimizer& optimizer) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (const auto& p : params) WriteFloats(out, p);
  for (const auto& p : params) {
    auto state = GetParamState(optimizer, p);
    if (!state.ok()) return state.status();
    for (const auto& [key, value] : *state) WriteFloats(out, value);
  }
  if (!out) return Status::IOError("cannot write --dump-state '" + path + "'");
  return Status::Ok();
}

}  // namespace ctrun::trainer::ft
