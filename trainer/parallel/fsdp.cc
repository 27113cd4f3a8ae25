#include "trainer/parallel/fsdp.h"

#include "trainer/comm/torch_error.h"
#include "trainer/parallel/cpu_offload.h"
#include "trainer/parallel/hsdp.h"
#include "trainer/parallel/wrap_policy.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>

#include <map>
#include <set>
#include <stdexcept>

namespace ctrun::trainer {

struct FullyShardedDataParallel::Unit {
  FlatLayout layout;
  std::vector<at::Tensor> params;      // the root's parameters, layout order
  UnitSpan stages;
  at::Tensor shard;                    // float32 master, requires grad
  at::Tensor full;                     // gathered compute-dtype buffer, or undefined
  at::Tensor buffer;                   // the gather buffer (sharded): 0 bytes while freed
  at::Tensor incoming;                 // all-gather target while in flight (= buffer)
  at::Tensor send;                     // all-gather source while in flight
  c10::intrusive_ptr<c10d::Work> gather_work;
  HeldBytes::Lease gathered;           // `incoming` or `full`, while either is held
  // Backward.
  std::vector<bool> got;
  size_t pending = 0;
  bool ready = false;                  // all gradients in (or given up at finish)
  at::Tensor grad_full;                // padded flat gradient on the wire
  at::Tensor grad_shard;               // its reduced part
  HeldBytes::Lease grad_buffers;       // grad_full, grad_shard and the wire's copies
  c10::intrusive_ptr<c10d::Work> reduce_work;

  int64_t FullBytes(at::ScalarType dtype) const {
    return layout.padded_numel * static_cast<int64_t>(c10::elementSize(dtype));
  }
};

namespace {

// Frees `t`'s memory in place: its StorageImpl stays (0 bytes), so every
// tensor over it, the views autograd saved in forward included, lets go of
// the memory too (PyTorch FSDP's _free_storage).
void FreeStorage(const at::Tensor& t) {
  if (!t.defined()) return;
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  if (storage->nbytes() == 0) return;
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, storage->device()));
  storage->set_nbytes(0);
}

// Gives `t`'s storage `bytes` of fresh memory (PyTorch FSDP's
// _alloc_storage); the tensors over it see it again.
void AllocStorage(const at::Tensor& t, size_t bytes) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  if (storage->nbytes() == bytes) return;
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
}

}  // namespace

Result<ShardingStrategy> ParseShardingStrategy(const std::string& name) {
  if (name == "full_shard" || name == "fsdp") return ShardingStrategy::kFullShard;
  if (name == "shard_grad_op" || name == "zero2") return ShardingStrategy::kShardGradOp;
  if (name == "no_shard") return ShardingStrategy::kNoShard;
  return Status::InvalidArgument("sharding strategy '" + name +
                                 "': unknown (use full_shard, shard_grad_op or no_shard)");
}

FullyShardedDataParallel::FullyShardedDataParallel(torch::nn::Module& root,
                                                   std::vector<FsdpStage> stages,
                                                   Communicator& comm, FsdpOptions options)
    : root_(root), stages_(std::move(stages)), comm_(comm), options_(options),
      compute_dtype_(options.mixed_precision ? at::kBFloat16 : at::kFloat) {}

FullyShardedDataParallel::~FullyShardedDataParallel() = default;

Result<std::unique_ptr<FullyShardedDataParallel>> FullyShardedDataParallel::Create(
    torch::nn::Module& root, std::vector<FsdpStage> stages, Communicator& comm,
    FsdpOptions options) {
  std::unique_ptr<FullyShardedDataParallel> fsdp(
      new FullyShardedDataParallel(root, std::move(stages), comm, options));
  CTRUN_RETURN_IF_ERROR(fsdp->Init());
  return fsdp;
}

// The root's trainable parameters, grouped by the stage that owns them.
struct FullyShardedDataParallel::StageParams {
  std::map<const void*, std::string> names;       // every root parameter, by TensorImpl
  std::vector<std::vector<at::Tensor>> params;    // per stage, module order
  std::vector<int64_t> numels;                    // per stage
};

Status FullyShardedDataParallel::Init() {
  auto stage_params = CollectStageParams();
  if (!stage_params.ok()) return stage_params.status();
  auto spans = SizeBasedWrap(stage_params->numels, options_.min_unit_params);
  if (!spans.ok()) return spans.status();
  ProbeBf16Sum();
  if (options_.offload_params && !sharded()) {
    return Status::InvalidArgument("FSDP: CPU offload of parameters needs a sharded strategy "
                                   "(full_shard or shard_grad_op), not no_shard");
  }

  at::NoGradGuard no_grad;
  CTRUN_RETURN_IF_ERROR(FindDevice(*stage_params));
  placeholder_ = at::empty({0}, Options(compute_dtype_));
  for (const auto& span : *spans) {
    auto unit = MakeUnit(span, *stage_params);
    if (!unit.ok()) return unit.status();
    units_.push_back(std::move(*unit));
  }
  CTRUN_RETURN_IF_ERROR(BroadcastBuffers());
  AddGradHooks();
  for (auto& unit : units_) {
    Free(*unit);
    // kNoShard keeps its compute-dtype copy for good; in float32 it computes
    // on views of the shard itself: nothing extra.
    if (unit->full.defined() && !sharded() && compute_dtype_ != at::kFloat) {
      unit->gathered = gathered_bytes_.Hold(unit->FullBytes(compute_dtype_));
    }
  }
  ResetPeaks();
  return Status::Ok();
}

Result<FullyShardedDataParallel::StageParams> FullyShardedDataParallel::CollectStageParams() const {
  StageParams out;
  for (const auto& item : root_.named_parameters(true)) {
    out.names[item.value().unsafeGetTensorImpl()] = item.key();
  }
  std::set<const void*> taken;
  out.params.resize(stages_.size());
  out.numels.assign(stages_.size(), 0);
  for (size_t s = 0; s < stages_.size(); ++s) {
    if (!stages_[s].module || !stages_[s].forward) {
      return Status::InvalidArgument("FSDP: stage " + std::to_string(s) +
                                     " has no module or no forward function");
    }
    for (const auto& param : stages_[s].module->parameters(true)) {
      if (!param.requires_grad()) continue;
      const void* key = param.unsafeGetTensorImpl();
      if (!out.names.count(key)) {
        return Status::InvalidArgument("FSDP: stage " + std::to_string(s) +
                                       "'s module is not a submodule of the root module");
      }
      if (!taken.insert(key).second) {
        return Status::InvalidArgument("FSDP: parameter '" + out.names[key] +
                                       "' is in two stages; give each stage its own submodule");
      }
      if (param.scalar_type() != at::kFloat) {
        return Status::InvalidArgument("FSDP: parameter '" + out.names[key] + "' is " +
                                       std::string(c10::toString(param.scalar_type())) +
                                       "; FSDP shards float32 parameters only");
      }
      out.params[s].push_back(param);
      out.numels[s] += param.numel();
    }
  }
  for (const auto& item : root_.named_parameters(true)) {
    if (item.value().requires_grad() && !taken.count(item.value().unsafeGetTensorImpl())) {
      return Status::InvalidArgument("FSDP: parameter '" + item.key() +
                                     "' belongs to no stage; add its module to a stage");
    }
  }
  if (taken.empty()) {
    return Status::InvalidArgument("FSDP: the stages hold no parameter that requires grad");
  }
  return out;
}

void FullyShardedDataParallel::ProbeBf16Sum() {
  if (options_.mixed_precision && !sharded() && comm_.size() > 1) {
    // Sharded strategies only move bf16 (as int16); kNoShard must sum it.
    at::Tensor probe = at::zeros({1}, at::kBFloat16);
    reduce_in_fp32_ = !WaitWork(comm_.AllReduceSum(probe), "bf16 probe").ok();
  }
}

Status FullyShardedDataParallel::FindDevice(const StageParams& stage_params) {
  bool first = true;
  for (const auto& params : stage_params.params) {
    for (const auto& param : params) {
      if (first) device_ = param.device();
      first = false;
      if (param.device() != device_) {
        return Status::InvalidArgument("FSDP: parameters are on " + device_.str() + " and " +
                                       param.device().str() + "; move the model to one device first");
      }
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<FullyShardedDataParallel::Unit>> FullyShardedDataParallel::MakeUnit(
    const UnitSpan& span, const StageParams& stage_params) {
  const int world = comm_.size();
  auto unit = std::make_unique<Unit>();
  unit->stages = span;
  std::vector<FlatEntry> entries;
  for (size_t s = span.begin; s < span.end; ++s) {
    for (const auto& param : stage_params.params[s]) {
      unit->params.push_back(param);
      entries.push_back({stage_params.names.at(param.unsafeGetTensorImpl()), param.sizes().vec(), 0, 0});
    }
  }
  unit->layout = MakeFlatLayout(std::move(entries), world);
  const FlatLayout& layout = unit->layout;
  at::Tensor flat = at::zeros({layout.padded_numel}, Options(at::kFloat));
  for (size_t i = 0; i < unit->params.size(); ++i) {
    const FlatEntry& entry = layout.entries[i];
    flat.narrow(0, entry.offset, entry.numel).copy_(unit->params[i].detach().reshape({-1}));
  }
  if (world > 1) {
    std::vector<at::Tensor> tensors{flat};
    CTRUN_RETURN_IF_ERROR(WaitWork(comm_.Broadcast(tensors, 0), "broadcast of parameters"));
  }
  CTRUN_RETURN_IF_ERROR(BroadcastAcrossReplicas(options_.replicate, flat));
  unit->shard = sharded() ? flat.narrow(0, comm_.rank() * layout.shard_numel, layout.shard_numel).clone()
                          : flat;
  if (options_.offload_params) unit->shard = ToHost(unit->shard, device_.is_cuda());
  unit->shard.set_requires_grad(true);
  at::Tensor full = compute_dtype_ == at::kFloat ? (sharded() ? flat : unit->shard.detach())
                                                 : flat.to(compute_dtype_);
  if (sharded()) unit->buffer = full;
  Install(*unit, full);
  unit->got.assign(unit->params.size(), false);
  unit->pending = unit->params.size();
  return unit;
}

Status FullyShardedDataParallel::BroadcastBuffers() {
  if (comm_.size() <= 1 && options_.replicate == nullptr) return Status::Ok();
  for (auto& buffer : root_.buffers(true)) {
    std::vector<at::Tensor> tensors{buffer};
    CTRUN_RETURN_IF_ERROR(WaitWork(comm_.Broadcast(tensors, 0), "broadcast of buffers"));
    CTRUN_RETURN_IF_ERROR(BroadcastAcrossReplicas(options_.replicate, buffer));
  }
  return Status::Ok();
}

void FullyShardedDataParallel::AddGradHooks() {
  // Accumulators are made while parameters have their full shape and the
  // compute dtype, which they keep for good (only their data is swapped).
  for (size_t u = 0; u < units_.size(); ++u) {
    for (size_t i = 0; i < units_[u]->params.size(); ++i) {
      auto accumulator = torch::autograd::impl::grad_accumulator(units_[u]->params[i]);
      accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
          [this, u, i](const torch::autograd::variable_list& outputs,
                       const torch::autograd::variable_list& /*inputs*/) {
            OnGradReady(u, i);
            return outputs;
          }));
      grad_accumulators_.push_back(std::move(accumulator));
    }
  }
}

at::TensorOptions FullyShardedDataParallel::Options(at::ScalarType dtype) const {
  return at::TensorOptions().dtype(dtype).device(device_);
}

std::vector<at::Tensor> FullyShardedDataParallel::parameters() const {
  std::vector<at::Tensor> out;
  for (const auto& unit : units_) out.push_back(unit->shard);
  return out;
}

size_t FullyShardedDataParallel::unit_count() const { return units_.size(); }
const FlatLayout& FullyShardedDataParallel::layout(size_t unit) const { return units_[unit]->layout; }
const at::Tensor& FullyShardedDataParallel::shard(size_t unit) const { return units_[unit]->shard; }

std::vector<std::vector<std::string>> FullyShardedDataParallel::UnitNames() const {
  std::vector<std::vector<std::string>> out;
  for (const auto& unit : units_) {
    out.emplace_back();
    for (const auto& entry : unit->layout.entries) out.back().push_back(entry.name);
  }
  return out;
}

void FullyShardedDataParallel::Install(Unit& unit, const at::Tensor& full) {
  unit.full = full;
  for (size_t i = 0; i < unit.params.size(); ++i) {
    const FlatEntry& entry = unit.layout.entries[i];
    unit.params[i].set_data(full.narrow(0, entry.offset, entry.numel).view(entry.shape));
  }
}

void FullyShardedDataParallel::Free(Unit& unit) {
  if (!sharded() || !unit.full.defined()) return;
  for (auto& param : unit.params) param.set_data(placeholder_);
  unit.full = at::Tensor();
  FreeStorage(unit.buffer);
  unit.gathered.Release();
}

void FullyShardedDataParallel::DropGather(Unit& unit) {
  unit.gather_work.reset();
  unit.send = at::Tensor();
  unit.incoming = at::Tensor();
  if (!unit.full.defined()) FreeStorage(unit.buffer);
  unit.gathered.Release();
}

void FullyShardedDataParallel::StartGather(size_t u) {
  Unit& unit = *units_[u];
  if (!sharded() || unit.full.defined() || unit.gather_work) return;
  at::NoGradGuard no_grad;
  unit.send = ShardOnDevice(unit.shard, device_, compute_dtype_);
  AllocStorage(unit.buffer, static_cast<size_t>(unit.FullBytes(compute_dtype_)));
  unit.incoming = unit.buffer;
  unit.gathered = gathered_bytes_.Hold(unit.FullBytes(compute_dtype_));
  try {
    unit.gather_work = comm_.AllGather(unit.send, unit.incoming);
  } catch (const std::exception& error) {
    start_error_ = Status::Unavailable("all-gather of parameters could not start: " +
                                       TorchErrorLine(error));
    DropGather(unit);
  }
}

Status FullyShardedDataParallel::EnsureGathered(size_t u) {
  Unit& unit = *units_[u];
  at::NoGradGuard no_grad;
  if (!sharded()) {
    if (compute_dtype_ != at::kFloat) Install(unit, unit.shard.detach().to(compute_dtype_));
    return Status::Ok();
  }
  if (unit.full.defined()) return Status::Ok();
  StartGather(u);
  if (!unit.gather_work) {
    Status status = start_error_;
    start_error_ = Status::Ok();
    return status;
  }
  Status status = WaitWork(unit.gather_work, "all-gather of parameters");
  if (!status.ok()) {
    DropGather(unit);
    return status;
  }
  unit.gather_work.reset();
  unit.send = at::Tensor();
  Install(unit, unit.incoming);
  unit.incoming = at::Tensor();
  return Status::Ok();
}

Result<at::Tensor> FullyShardedDataParallel::Forward(const at::Tensor& input) {
  const bool grad = at::GradMode::is_enabled();
  at::Tensor x = compute_dtype_ != at::kFloat && input.is_floating_point() ? input.to(compute_dtype_)
                                                                          : input;
  for (size_t u = 0; u < units_.size(); ++u) {
    CTRUN_RETURN_IF_ERROR(EnsureGathered(u));
    if (options_.prefetch && u + 1 < units_.size()) StartGather(u + 1);
    try {
      for (size_t s = units_[u]->stages.begin; s < units_[u]->stages.end; ++s) {
        x = stages_[s].forward(x);
      }
    } catch (const std::exception& error) {
      return Status::Internal("forward of stage failed: " + TorchErrorLine(error));
    }
    const bool last = u + 1 == units_.size();
    if (!grad || (options_.strategy == ShardingStrategy::kFullShard && !last)) Free(*units_[u]);
    if (grad && x.requires_grad()) {
      x.register_hook([this, u](const at::Tensor&) { OnPreBackward(u); });
    }
  }
  if (!grad) CTRUN_RETURN_IF_ERROR(Reshard());
  if (compute_dtype_ != at::kFloat && x.is_floating_point()) x = x.to(at::kFloat);
  return x;
}

void FullyShardedDataParallel::OnPreBackward(size_t u) {
  if (!hook_error_.ok()) return;
  Status status = EnsureGathered(u);
  if (!status.ok()) {
    hook_error_ = status;
    throw std::runtime_error(status.message());
  }
  if (options_.prefetch && u > 0) StartGather(u - 1);
}

void FullyShardedDataParallel::OnGradReady(size_t u, size_t slot) {
  if (accumulating_) return;  // reduced at ReduceAccumulatedGrads
  Unit& unit = *units_[u];
  if (unit.ready || unit.got[slot]) {
    hook_error_ = Status::FailedPrecondition(
        "FSDP: a parameter got a second gradient before FinishGradSync; call FinishGradSync "
        "(or Backward) after each backward (gradient accumulation is not supported)");
    return;
  }
  unit.got[slot] = true;
  if (--unit.pending == 0) {
    unit.ready = true;
    LaunchReadyReductions();
  }
}

void FullyShardedDataParallel::LaunchReadyReductions() {
  while (reduced_ < units_.size() && units_[units_.size() - 1 - reduced_]->ready) {
    LaunchReduction(units_.size() - 1 - reduced_);
    ++reduced_;
  }
}

void FullyShardedDataParallel::LaunchReduction(size_t u) {
  Unit& unit = *units_[u];
  at::NoGradGuard no_grad;
  // One reduction in flight: the previous unit's overlapped this unit's
  // backward, and its full-size buffers are a step's largest transient memory.
  while (!in_flight_.empty()) {
    Status finished = FinishReduction(*units_[in_flight_.front()]);
    in_flight_.pop_front();
    if (hook_error_.ok() && !finished.ok()) hook_error_ = finished;
  }
  // Every gradient of the unit exists: its parameters are not needed any
  // more in this backward; their memory goes before the gradient buffers
  // come.
  Free(unit);
  const at::ScalarType wire = reduce_in_fp32_ ? at::kFloat : compute_dtype_;
  unit.grad_full = at::zeros({unit.layout.padded_numel}, Options(wire));
  for (size_t i = 0; i < unit.params.size(); ++i) {
    at::Tensor& param = unit.params[i];
    if (!param.grad().defined()) continue;
    const FlatEntry& entry = unit.layout.entries[i];
    unit.grad_full.narrow(0, entry.offset, entry.numel).copy_(param.grad().reshape({-1}));
    param.mutable_grad() = at::Tensor();
  }
  const int world = comm_.size();
  if (world > 1) unit.grad_full.div_(world);
  const int64_t full_bytes = unit.grad_full.numel() * static_cast<int64_t>(unit.grad_full.element_size());
  int64_t buffer_bytes = full_bytes;
  try {
    if (sharded()) {
      unit.grad_shard = at::empty({unit.layout.shard_numel}, unit.grad_full.options());
      buffer_bytes += full_bytes / world;
      if (comm_.backend() == "gloo") buffer_bytes += full_bytes;  // all-to-all receive
      unit.reduce_work = comm_.ReduceScatterSum(unit.grad_full, unit.grad_shard);
    } else {
      unit.grad_shard = unit.grad_full;
      unit.reduce_work = comm_.AllReduceSum(unit.grad_full);
    }
  } catch (const std::exception& error) {
    hook_error_ = Status::Unavailable("reduction of gradients could not start: " +
                                      TorchErrorLine(error));
  }
  unit.grad_buffers = grad_buffer_bytes_.Hold(buffer_bytes);
  in_flight_.push_back(u);
}

Status FullyShardedDataParallel::FinishReduction(Unit& unit) {
  Status status;
  if (unit.reduce_work) status = WaitWork(unit.reduce_work, "reduction of gradients");
  if (status.ok() && unit.grad_shard.defined()) {
    at::NoGradGuard no_grad;
    at::Tensor grad = unit.grad_shard.to(at::kFloat);
    status = AverageAcrossReplicas(options_.replicate, grad);  // HSDP: then across replicas
    if (unit.shard.grad().defined()) {
      unit.shard.mutable_grad().copy_(grad);
    } else {
      unit.shard.mutable_grad() = GradLike(grad, unit.shard);
    }
  }
  unit.reduce_work.reset();
  unit.grad_full = at::Tensor();
  unit.grad_shard = at::Tensor();
  unit.grad_buffers.Release();
  return status;
}

Status FullyShardedDataParallel::Backward(const at::Tensor& loss) {
  try {
    loss.backward();
  } catch (const std::exception& error) {
    if (!hook_error_.ok()) {
      Status status = hook_error_;
      hook_error_ = Status::Ok();
      (void)FinishGradSync();
      return status;
    }
    return Status::Internal("backward failed: " + TorchErrorLine(error));
  }
  return FinishGradSync();
}

Status FullyShardedDataParallel::FinishGradSync() {
  // Units with unused parameters never became ready: launch them now, in order.
  for (auto& unit : units_) unit->ready = true;
  LaunchReadyReductions();
  Status status = hook_error_;
  for (size_t u : in_flight_) {
    Status finished = FinishReduction(*units_[u]);
    if (status.ok()) status = finished;
  }
  in_flight_.clear();
  for (auto& unit_ptr : units_) {
    Unit& unit = *unit_ptr;
    unit.got.assign(unit.params.size(), false);
    unit.pending = unit.params.size();
    unit.ready = false;
  }
  reduced_ = 0;
  hook_error_ = Status::Ok();
  Status freed = Reshard();
  return status.ok() ? freed : status;
}

Status FullyShardedDataParallel::Reshard() {
  Status status;
  for (auto& unit : units_) {
    if (unit->gather_work) {
      Status waited = WaitWork(unit->gather_work, "all-gather of parameters");
      if (status.ok()) status = waited;
      DropGather(*unit);
    }
    Free(*unit);
  }
  return status;
}

FsdpMemory FullyShardedDataParallel::Memory() const {
  FsdpMemory memory;
  for (const auto& unit : units_) {
    memory.shard_param_bytes += static_cast<int64_t>(unit->shard.storage().nbytes());
    if (unit->shard.grad().defined()) {
      memory.shard_grad_bytes += static_cast<int64_t>(unit->shard.grad().storage().nbytes());
    }
    memory.max_unit_bytes = std::max(memory.max_unit_bytes, unit->FullBytes(compute_dtype_));
  }
  memory.gathered_bytes = gathered_bytes_.current();
  memory.peak_gathered_bytes = gathered_bytes_.peak();
  memory.peak_grad_buffer_bytes = grad_buffer_bytes_.peak();
  memory.peak_held_bytes = held_bytes_.peak();
  return memory;
}

void FullyShardedDataParallel::ResetPeaks() {
  gathered_bytes_.ResetPeak();
  grad_buffer_bytes_.ResetPeak();
  held_bytes_.ResetPeak();
}

}  // namespace ctrun::trainer
