#include "trainer/ft/group_average.h"

namespace ctrun::trainer::ft {

bool AverageAcrossGroups(FtReplica& replica, const std::vector<at::Tensor>& params, std::vector<float>& flat) {
  std::vector<at::Tensor> grads;
  for (const auto& param : params) {
    if (!param.grad().defined()) param.mutable_grad() = at::zeros_like(param);
    grads.push_back(param.grad().detach().cpu().contiguous().reshape({-1}));
  }
  const at::Tensor joined = at::cat(grads).to(at::kFloat);
  flat.resize(static_cast<size_t>(joined.numel()));
  at::Tensor flat_view = at::from_blob(flat.data(), {joined.numel()}, at::kFloat);
  flat_view.copy_(joined);
  if (!replica.AllReduceMean(flat.data(), flat.size())) return false;
  int64_t offset = 0;
  at::NoGradGuard no_grad;
  for (const auto& param : params) {
    at::Tensor g = param.grad();
    g.copy_(flat_view.narrow(0, offset, g.numel()).view(g.sizes()));
    offset += g.numel();
  }
  return true;
}

}  // namespace ctrun::trainer::ft
