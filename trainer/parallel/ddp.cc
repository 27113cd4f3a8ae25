#include "trainer/parallel/ddp.h"

#include "trainer/comm/torch_error.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>

#include <chrono>

namespace ctrun::trainer {
namespace {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Broadcasts `tensors` from rank 0, one flat tensor per (dtype, device) run.
Status BroadcastFromRoot(Communicator& comm, const std::vector<at::Tensor>& tensors,
                         const std::string& what) {
  if (comm.size() == 1 || tensors.empty()) return Status::Ok();
  at::NoGradGuard no_grad;
  size_t begin = 0;
  while (begin < tensors.size()) {
    size_t end = begin + 1;
    while (end < tensors.size() && tensors[end].scalar_type() == tensors[begin].scalar_type() &&
           tensors[end].device() == tensors[begin].device()) {
      ++end;
    }
    std::vector<at::Tensor> flat_parts;
    for (size_t i = begin; i < end; ++i) flat_parts.push_back(tensors[i].detach().reshape({-1}));
    std::vector<at::Tensor> flat{at::cat(flat_parts)};
    CTRUN_RETURN_IF_ERROR(WaitWork(comm.Broadcast(flat, 0), what));
    int64_t offset = 0;
    for (size_t i = begin; i < end; ++i) {
      const int64_t numel = tensors[i].numel();
      tensors[i].detach().copy_(flat[0].narrow(0, offset, numel).view_as(tensors[i]));
      offset += numel;
    }
    begin = end;
  }
  return Status::Ok();
}

// A contiguous tensor shaped like `param` over flat[offset, offset + numel):
// storage shared with `flat`, but not an autograd view of it, so optimizers
// may detach_() and zero_() it as any .grad.
at::Tensor GradView(const at::Tensor& flat, int64_t offset, const at::Tensor& param) {
  std::vector<int64_t> strides(static_cast<size_t>(param.dim()), 1);
  for (int64_t d = param.dim() - 1; d > 0; --d) strides[d - 1] = strides[d] * param.size(d);
  at::Tensor view = at::empty({0}, flat.options());
  view.set_(flat.storage(), flat.storage_offset() + offset, param.sizes(), strides);
  return view;
}

// Whether `grad` is `view`'s memory (the .grad DDP installed, or an alias of
// it an optimizer made by detaching it).
bool IsSlot(const at::Tensor& grad, const at::Tensor& view) {
  return grad.defined() && grad.data_ptr() == view.data_ptr() && grad.sizes() == view.sizes() &&
         grad.strides() == view.strides() && grad.scalar_type() == view.scalar_type();
}

}  // namespace

struct DistributedDataParallel::Bucket {
  std::vector<size_t> params;     // indices into params_, in slot order
  std::vector<int64_t> offsets;   // slot -> offset in flat
  std::vector<at::Tensor> views;  // slot -> its gradient, aliasing flat
  std::vector<bool> ready;        // slot got its gradient this backward
  size_t pending = 0;             // slots still without a gradient
  at::Tensor flat;                // gradients, param dtype
  at::Tensor wire;                // what goes on the wire (flat or compressed)
  c10::intrusive_ptr<c10d::Work> work;
  std::unique_ptr<TopkBucket> topk;  // under kTopk
  at::Tensor gathered;            // kTopk, sparse step: every rank's message
};

Result<GradCompression> ParseGradCompression(const std::string& name) {
  if (name == "none") return GradCompression::kNone;
  if (name == "fp16") return GradCompression::kFp16;
  if (name == "bf16") return GradCompression::kBf16;
  return Status::InvalidArgument("--grad-compression '" + name +
                                 "': unknown (use none, fp16 or bf16)");
}

DistributedDataParallel::DistributedDataParallel(torch::nn::Module& module, Communicator& comm,
                                                 DdpOptions options)
    : module_(module), comm_(comm), options_(options) {}

DistributedDataParallel::~DistributedDataParallel() = default;

Result<std::unique_ptr<DistributedDataParallel>> DistributedDataParallel::Create(
    torch::nn::Module& module, Communicator& comm, DdpOptions options) {
  if (!(options.bucket_cap_mb > 0) || !(options.first_bucket_cap_mb > 0)) {
    return Status::InvalidArgument("--bucket-cap-mb " + std::to_string(options.bucket_cap_mb) +
                                   ": must be greater than 0 (PyTorch's default is 25)");
  }
  std::unique_ptr<DistributedDataParallel> ddp(new DistributedDataParallel(module, comm, options));
  CTRUN_RETURN_IF_ERROR(ddp->Init());
  return ddp;
}

Status DistributedDataParallel::Init() {
  for (const auto& param : module_.parameters(/*recurse=*/true)) {
    if (param.requires_grad()) params_.push_back(param);
  }
  if (params_.empty()) {
    return Status::InvalidArgument("DDP: the module has no parameter that requires grad");
  }
  CTRUN_RETURN_IF_ERROR(BroadcastFromRoot(comm_, module_.parameters(true), "broadcast of parameters"));
  if (options_.compression == GradCompression::kBf16 && comm_.size() > 1) {
    // Gloo in torch 1.13 has no bfloat16 reduction; it fails on every rank
    // alike, so probing here keeps the ranks in step.
    at::Tensor probe = at::zeros({1}, at::kBFloat16);
    Status probed = WaitWork(comm_.AllReduceSum(probe), "bf16 probe");
    if (!probed.ok()) {
      return Status::InvalidArgument("--grad-compression bf16: the " + comm_.backend() +
                                     " process group of this libtorch cannot all-reduce bfloat16 (" +
                                     probed.message() + "); use fp16 or none");
    }
  }
  CTRUN_RETURN_IF_ERROR(SyncBuffers());
  CTRUN_RETURN_IF_ERROR(CheckTopk());

  // Reverse registration order; a bucket closes when full or when dtype or
  // device change.
  bucket_of_.assign(params_.size(), 0);
  slot_of_.assign(params_.size(), 0);
  int64_t bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const at::Tensor& param = params_[k];
    const double cap_mb = buckets_.size() <= 1 ? options_.first_bucket_cap_mb : options_.bucket_cap_mb;
    const int64_t cap = static_cast<int64_t>(cap_mb * 1024 * 1024);
    bool open_new = buckets_.empty();
    if (!open_new) {
      const at::Tensor& first = params_[buckets_.back()->params.front()];
      open_new = bytes >= cap || first.scalar_type() != param.scalar_type() ||
                 first.device() != param.device();
    }
    if (open_new) {
      buckets_.push_back(std::make_unique<Bucket>());
      bytes = 0;
    }
    Bucket& bucket = *buckets_.back();
    bucket_of_[k] = buckets_.size() - 1;
    slot_of_[k] = bucket.params.size();
    bucket.params.push_back(k);
    bytes += param.numel() * static_cast<int64_t>(param.element_size());
  }
  for (auto& bucket : buckets_) {
    int64_t numel = 0;
    for (size_t k : bucket->params) {
      bucket->offsets.push_back(numel);
      numel += params_[k].numel();
    }
    bucket->flat = at::zeros({numel}, params_[bucket->params.front()].options().requires_grad(false));
    for (size_t slot = 0; slot < bucket->params.size(); ++slot) {
      bucket->views.push_back(GradView(bucket->flat, bucket->offsets[slot], params_[bucket->params[slot]]));
    }
    bucket->ready.assign(bucket->params.size(), false);
    bucket->pending = bucket->params.size();
    if (options_.compression == GradCompression::kTopk) {
      std::vector<int64_t> numels;
      for (size_t k : bucket->params) numels.push_back(params_[k].numel());
      bucket->topk = std::make_unique<TopkBucket>(bucket->offsets, numels, numel, bucket->flat.options(),
                                                  options_.topk);
    }
  }

  for (size_t k = 0; k < params_.size(); ++k) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params_[k]);
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, k](const torch::autograd::variable_list& outputs,
                  const torch::autograd::variable_list& /*inputs*/) {
          OnGradReady(k);
          return outputs;
        }));
    // The variable holds its accumulator weakly; keep it (and the hook) alive.
    grad_accumulators_.push_back(std::move(accumulator));
  }
  return Status::Ok();
}

TopkState DistributedDataParallel::topk_state() const {
  TopkState state;
  if (options_.compression != GradCompression::kTopk) return state;
  state.synced_steps = topk_synced_steps_;
  for (const auto& item : module_.named_parameters(/*recurse=*/true)) {
    if (item.value().requires_grad()) state.names.push_back(item.key());
  }
  for (size_t k = 0; k < params_.size(); ++k) {
    const Bucket& bucket = *buckets_[bucket_of_[k]];
    const int64_t offset = bucket.offsets[slot_of_[k]];
    const at::Tensor& param = params_[k];
    state.momentum.push_back(bucket.topk->momentum().narrow(0, offset, param.numel()).view(param.sizes()));
    state.residual.push_back(bucket.topk->residual().narrow(0, offset, param.numel()).view(param.sizes()));
  }
  return state;
}

// Top-k's options and dtype (float32 only); every rank sees the same, so
// every rank refuses alike.
Status DistributedDataParallel::CheckTopk() const {
  if (options_.compression != GradCompression::kTopk) return Status::Ok();
  CTRUN_RETURN_IF_ERROR(CheckTopkOptions(options_.topk));
  for (const auto& param : params_) {
    if (param.scalar_type() != at::kFloat) {
      return Status::InvalidArgument(std::string("--grad-compression topk: parameters must be float32, "
                                                 "not ") + c10::toString(param.scalar_type()) +
                                     "; use none or fp16");
    }
  }
  return Status::Ok();
}

Status DistributedDataParallel::SyncBuffers() {
  return BroadcastFromRoot(comm_, module_.buffers(true), "broadcast of buffers");
}

std::vector<std::vector<size_t>> DistributedDataParallel::BucketLayout() const {
  std::vector<std::vector<size_t>> layout;
  for (const auto& bucket : buckets_) layout.push_back(bucket->params);
  return layout;
}

std::vector<at::Tensor> DistributedDataParallel::Buckets() const {
  std::vector<at::Tensor> flats;
  for (const auto& bucket : buckets_) flats.push_back(bucket->flat);
  return flats;
}

void DistributedDataParallel::OnGradReady(size_t param_index) {
  if (!sync_) return;
  Bucket& bucket = *buckets_[bucket_of_[param_index]];
  const size_t slot = slot_of_[param_index];
  if (bucket.ready[slot] || bucket_of_[param_index] < next_launch_) {
    // A second gradient before FinishGradSync: the bucket may be on the wire.
    // Leave it; FinishGradSync reports the misuse.
    second_grad_ = true;
    return;
  }
  const at::Tensor& grad = params_[param_index].grad();
  if (!IsSlot(grad, bucket.views[slot])) {  // a new .grad (the first step, or a user's)
    at::NoGradGuard no_grad;
    bucket.flat.narrow(0, bucket.offsets[slot], grad.numel()).copy_(grad.reshape({-1}));
  }
  bucket.ready[slot] = true;
  --bucket.pending;
  if (bucket.pending == 0) LaunchReadyBuckets();
}

void DistributedDataParallel::LaunchReadyBuckets() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_]->pending == 0) {
    Launch(*buckets_[next_launch_]);
    ++next_launch_;
  }
}

void DistributedDataParallel::Launch(Bucket& bucket) {
  if (next_launch_ == 0) first_launch_ = NowSeconds();
  at::NoGradGuard no_grad;
  stats_.dense_bytes += bucket.flat.numel() * static_cast<int64_t>(bucket.flat.element_size());
  if (bucket.topk && topk_synced_steps_ >= options_.topk.warmup_steps) return LaunchTopk(bucket);
  const int world = comm_.size();
  if (world > 1) bucket.flat.div_(world);
  switch (options_.compression) {
    case GradCompression::kNone:
    case GradCompression::kTopk: bucket.wire = bucket.flat; break;  // top-k: a dense warm-up step
    case GradCompression::kFp16: bucket.wire = bucket.flat.to(at::kHalf); break;
    case GradCompression::kBf16: bucket.wire = bucket.flat.to(at::kBFloat16); break;
  }
  stats_.wire_bytes += bucket.wire.numel() * static_cast<int64_t>(bucket.wire.element_size());
  try {
    bucket.work = comm_.AllReduceSum(bucket.wire);
  } catch (const std::exception& error) {
    launch_error_ = Status::Unavailable("all-reduce of a gradient bucket could not start: " +
                                        TorchErrorLine(error));
    bucket.work.reset();
  }
}

// A sparse step: compress this rank's local gradient, all-gather the
// messages; FinishGradSync decompresses them into flat.
void DistributedDataParallel::LaunchTopk(Bucket& bucket) {
  const int world = comm_.size();
  bucket.wire = bucket.topk->Compress(bucket.flat, world);
  bucket.gathered = at::empty({world * bucket.wire.numel()}, bucket.wire.options());
  stats_.wire_bytes += bucket.wire.numel() * static_cast<int64_t>(bucket.wire.element_size());
  try {
    bucket.work = comm_.AllGather(bucket.wire, bucket.gathered);
  } catch (const std::exception& error) {
    launch_error_ = Status::Unavailable("all-gather of a top-k gradient bucket could not start: " +
                                        TorchErrorLine(error));
    bucket.work.reset();
  }
}

Status DistributedDataParallel::Backward(const at::Tensor& loss) {
  try {
    loss.backward();
  } catch (const std::exception& error) {
    return Status::Internal("backward failed: " + TorchErrorLine(error));
  }
  return FinishGradSync();
}

Status DistributedDataParallel::FinishGradSync() {
  if (!sync_) return Status::Ok();
  {
    at::NoGradGuard no_grad;
    // Buckets with unused parameters were never launched: fill and launch
    // them now, still in index order.
    for (size_t b = next_launch_; b < buckets_.size(); ++b) {
      Bucket& bucket = *buckets_[b];
      for (size_t slot = 0; slot < bucket.params.size(); ++slot) {
        if (bucket.ready[slot]) continue;
        const at::Tensor& param = params_[bucket.params[slot]];
        at::Tensor dest = bucket.flat.narrow(0, bucket.offsets[slot], param.numel());
        if (!param.grad().defined()) {
          dest.zero_();
        } else if (!IsSlot(param.grad(), bucket.views[slot])) {
          dest.copy_(param.grad().reshape({-1}));
        }
      }
      bucket.pending = 0;
    }
    LaunchReadyBuckets();
  }
  const double finish_start = NowSeconds();
  Status status = launch_error_;
  for (auto& bucket : buckets_) {
    if (bucket->work && status.ok()) status = WaitWork(bucket->work, "all-reduce of gradients");
    bucket->work.reset();
  }
  const double done = NowSeconds();
  if (status.ok() && second_grad_) {
    status = Status::FailedPrecondition(
        "DDP: a parameter got a second gradient before FinishGradSync; call FinishGradSync "
        "after each backward, or wrap accumulation steps in DistributedDataParallel::NoSync");
  }
  if (status.ok()) {
    at::NoGradGuard no_grad;
    for (auto& bucket : buckets_) {
      if (bucket->gathered.defined()) {
        bucket->topk->Decompress(bucket->gathered, comm_.size(), bucket->flat);
      } else if (bucket->topk) {
        bucket->topk->DenseStep(bucket->flat);
      } else if (bucket->wire.data_ptr() != bucket->flat.data_ptr()) {
        bucket->flat.copy_(bucket->wire);
      }
      // The averages are in flat already: each .grad becomes (stays) its
      // slot's view, so nothing is copied back, now or in later steps.
      for (size_t slot = 0; slot < bucket->params.size(); ++slot) {
        at::Tensor& param = params_[bucket->params[slot]];
        if (!IsSlot(param.grad(), bucket->views[slot])) param.mutable_grad() = bucket->views[slot];
      }
    }
    ++stats_.synced_steps;
    ++topk_synced_steps_;
    stats_.comm_span_seconds += done - first_launch_;
    stats_.exposed_seconds += done - finish_start;
  }
  for (auto& bucket : buckets_) {
    bucket->ready.assign(bucket->params.size(), false);
    bucket->pending = bucket->params.size();
    bucket->wire = at::Tensor();
    bucket->gathered = at::Tensor();
  }
  next_launch_ = 0;
  second_grad_ = false;
  launch_error_ = Status::Ok();
  return status;
}

}  // namespace ctrun::trainer
