#include "trainer/ft/group_average.h"

namespace ctrun::trainer::ft {

bool AverageAcrossGroups(FtReplica& replica, const std::vector<at::Tensor>& params, std::vector<float>& flat) {
  int64_t total = 0;
  for (const auto& param : params) {
    if (!param.grad().defined()) param.mutable_grad() = at::zeros_like(param);
    total += param.numel();
  }
  // Each gradient is copied into the flat buffer once (to host memory and
  // float32 as it goes), and back once after the ring.
  flat.resize(static_cast<size_t>(total));
  at::Tensor flat_view = at::from_blob(flat.data(), {total}, at::kFloat);
  at::NoGradGuard no_grad;
  int64_t offset = 0;
  for (const auto& param : params) {
    flat_view.narrow(0, offset, param.numel()).copy_(param.grad().detach().reshape({-1}));
    offset += param.numel();
  }
  if (!replica.AllReduceMean(flat.data(), flat.size())) return false;
  offset = 0;
  for (const auto& param : params) {
    at::Tensor g = param.grad();
    g.copy_(flat_view.narrow(0, offset, g.numel()).view(g.sizes()));
    offset += g.numel();
  }
  return true;
}

}  // namespace ctrun::trainer::ft
