// ctrun-gpt: the example worker for tensor, pipeline and data parallelism.
// Trains a small GPT-style decoder on byte-level text (the Debian license
// texts by default) on a (pp, dp, tp) device mesh, one process per rank,
// under ctrun/torchrun. See docs/trainer.md.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <utility>

#include "trainer/apps/app_main.h"
#include "trainer/apps/gpt_flags.h"
#include "trainer/apps/gpt_ft.h"
#include "trainer/apps/gpt_hsdp.h"
#include "trainer/apps/gpt_hsdp_flags.h"
#include "trainer/apps/gpt_precision.h"
#include "trainer/apps/preempt_save.h"
#include "trainer/parallel/ddp.h"
#include "trainer/comm/device_mesh.h"
#include "trainer/comm/dist_env.h"
#include "trainer/models/gpt.h"
#include "trainer/models/gpt_chunks.h"
#include "trainer/models/gpt_stages.h"
#include "trainer/parallel/attention_core.h"
#include "trainer/parallel/fsdp.h"
#include "trainer/parallel/heap_retention.h"
#include "trainer/parallel/storage_bytes.h"
#include "trainer/parallel/thread_cpu_clock.h"
#include "trainer/checkpoint/optimizer_state.h"
#include "trainer/parallel/memory_meter.h"
#include "trainer/checkpoint/fsdp_mesh_checkpoint.h"
#include "trainer/checkpoint/mesh_checkpoint.h"
#include "trainer/parallel/pipeline.h"
#include "trainer/comm/process_group.h"
#include "trainer/data/text_corpus.h"

namespace ctrun::trainer {
namespace {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t PeakRssKb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

std::string LayoutTable(const MeshShape& shape, int layers, const std::vector<int>& split, int chunks) {
  std::string out = "mesh " + shape.ToString() + ":";
  for (int rank = 0; rank < shape.size(); ++rank) {
    const MeshCoord c = shape.CoordOf(rank);
    out += "\n  rank " + std::to_string(rank) + ": stage " + std::to_string(c.pp) + " (blocks " +
           StageBlocksText(layers, shape.pp, c.pp, chunks, split) + (c.pp == 0 ? ", embedding" : "") +
           (c.pp == shape.pp - 1 ? ", head" : "") + "), dp replica " + std::to_string(c.dp) + ", tp slice " +
           std::to_string(c.tp) + "/" + std::to_string(shape.tp);
  }
  return out;
}

// (name, tensor) of each parameter to dump, in the module's order.
using NamedParams = std::vector<std::pair<std::string, at::Tensor>>;

Status DumpParams(const std::string& prefix, const MeshCoord& coord, const NamedParams& params,
                  const ShardRegistry& registry) {
  const std::string base = prefix + ".pp" + std::to_string(coord.pp) + ".tp" + std::to_string(coord.tp);
  std::ofstream bin(base + ".bin", std::ios::binary | std::ios::trunc);
  std::ofstream index(base + ".json", std::ios::trunc);
  index << "[";
  bool first = true;
  for (const auto& [name, value] : params) {
    const ShardSpec& spec = registry.at(name);
    at::Tensor flat = value.detach().to(at::kCPU).contiguous().reshape({-1});
    bin.write(reinterpret_cast<const char*>(flat.data_ptr<float>()), static_cast<std::streamsize>(flat.numel() * 4));
    std::string shape;
    for (int64_t d : spec.full_shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    index << (first ? "" : ",") << "\n {\"name\": \"" << name << "\", \"full_shape\": [" << shape
          << "], \"dim\": " << spec.dim << ", \"index\": " << spec.index << ", \"parts\": " << spec.parts
          << ", \"numel\": " << flat.numel() << "}";
    first = false;
  }
  index << "\n]\n";
  if (!bin || !index) return Status::IOError("--dump-params: cannot write " + base + ".bin/.json");
  return Status::Ok();
}

// The stage's parameters by name; under FSDP gathered from the shards
// (every rank must call it: it all-gathers each unit).
Result<NamedParams> FullParams(torch::nn::Module& stage, FullyShardedDataParallel* fsdp) {
  NamedParams out;
  std::map<std::string, at::Tensor> gathered;
  for (size_t u = 0; fsdp != nullptr && u < fsdp->unit_count(); ++u) {
    at::Tensor send = fsdp->shard(u).detach().to(fsdp->device());
    at::Tensor full = at::empty({send.numel() * fsdp->comm().size()}, send.options());
    CTRUN_RETURN_IF_ERROR(WaitWork(fsdp->comm().AllGather(send, full), "all-gather of parameters"));
    for (const auto& e : fsdp->layout(u).entries) gathered[e.name] = full.narrow(0, e.offset, e.numel).view(e.shape);
  }
  for (const auto& item : stage.named_parameters(true)) {
    out.emplace_back(item.key(), fsdp != nullptr ? gathered.at(item.key()) : item.value());
  }
  return out;
}

// Everything one rank trains with. Members are made in declaration order
// and destroyed in reverse (the optimizer and DDP before the stage, the
// stage before the mesh and the group). `flags` must outlive it.
struct GptWorker {
  explicit GptWorker(const GptFlags& f) : flags(f) {}
  GptWorker(const GptWorker&) = delete;
  GptWorker& operator=(const GptWorker&) = delete;

  const GptFlags& flags;
  DistEnv env;
  MeshShape shape;
  GptConfig config;
  std::vector<int> split;  // --pp-split, or empty
  TextCorpus corpus;
  std::shared_ptr<Communicator> world;
  // Where the model, batches and collectives live: cuda:LOCAL_RANK with
  // --backend nccl, else the CPU.
  at::Device device{at::kCPU};
  std::unique_ptr<DeviceMesh> mesh;
  MeshCoord coord;
  ShardRegistry registry;        // the stage's layers point here
  GptChunks stage{nullptr};     // the stage's model chunks (one unless interleaved)
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<FullyShardedDataParallel> fsdp;  // --strategy fsdp
  std::unique_ptr<GptPrecision> precision;        // --precision, --cpu-offload
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  int64_t start_step = 0;
  int64_t base_bytes = 0;        // tensor bytes alive before the model was made
};

// What the STATS line reports, over the steps run.
struct RunStats {
  double step_sum = 0, compute_sum = 0;
  double forward_sum = 0;        // of compute, in forward (the loss included)
  double core_sum = 0;           // in AttentionCore (forward and any recompute of it)
  double step_cpu_sum = 0, forward_cpu_sum = 0, core_cpu_sum = 0;  // the same in CPU seconds
  int measured = 0, peak_in_flight = 0;
  int64_t peak_step_bytes = 0, peak_tensor_high = 0;
  double iter_sum = 0;           // whole iterations (optimizer step included)
  int64_t step_high = 0;         // most tensor bytes alive in a step, less base_bytes
};

// The mesh shape (dp from the world size when 0), checked against the model.
AppOutcome ChooseShape(GptWorker& w) {
  const GptFlags& flags = w.flags;
  w.shape = flags.mesh_shape;
  if (w.shape.dp == 0) w.shape.dp = std::max(1, w.env.world_size / (w.shape.pp * w.shape.tp));
  w.config = GptConfig{.vocab = kByteVocab, .width = flags.width, .heads = flags.heads, .layers = flags.layers,
                       .seq_len = flags.seq_len, .recompute = flags.recompute};
  Status fits = CheckMeshShape(w.shape, w.env.world_size,
                               GptLimits(w.config, static_cast<int>(flags.global_batch),
                                         static_cast<int>(flags.micro_batches)));
  if (!fits.ok()) return {fits, kExitUsage};
  if (Status shard = CheckDpShardMesh(flags, w.shape); !shard.ok()) return {shard, kExitUsage};
  if (!flags.pp_split.empty()) {
    w.split = *ParseStageSplit(flags.pp_split, w.shape.pp, static_cast<int>(flags.layers));
  }
  return {};
}

// Joins the process group and builds the device mesh on it; rank 0 prints
// the layout.
AppOutcome JoinMesh(GptWorker& w) {
  const GptFlags& flags = w.flags;
  ProcessGroupOptions pg_options;
  pg_options.timeout = std::chrono::seconds(flags.store_timeout_s);
  pg_options.gloo_threads = 1;
  auto backend = ParseCommBackend(flags.backend);
  if (!backend.ok()) return {backend.status(), kExitUsage};
  pg_options.backend = *backend;
  auto world = ConnectProcessGroup(w.env, pg_options);
  if (!world.ok()) return {world.status()};
  w.world = *world;
  if (*backend == CommBackend::kNccl) w.device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(w.env.local_rank));
  auto mesh = DeviceMesh::Create(w.world, w.shape);
  if (!mesh.ok()) return {mesh.status()};
  w.mesh = std::move(*mesh);
  w.coord = w.mesh->coord();
  if (w.env.rank == 0) {
    const int v = static_cast<int>(flags.virtual_stages);
    std::printf("%s\n", LayoutTable(w.shape, static_cast<int>(flags.layers), w.split, v).c_str());
    if (w.shape.pp > 1) {
      const std::string chunks = v > 1 ? " with " + std::to_string(v) + " chunks a stage" : "";
      std::printf("pipeline: %d stages, %lld micro-batches, %s%s: bubble (p-1)/(%sm+p-1) = %.3f of a step\n",
                  w.shape.pp, static_cast<long long>(flags.micro_batches), PipeScheduleName(flags.schedule),
                  chunks.c_str(), v > 1 ? "v*" : "",
                  BubbleFraction(w.shape.pp, static_cast<int>(flags.micro_batches), v));
    }
    std::fflush(stdout);
  }
  return {};
}

// This rank's stage of the model, DDP over the dp group, the optimizer.
Status MakeStage(GptWorker& w) {
  const GptFlags& flags = w.flags;
  LayerContext ctx{.name = "", .seed = static_cast<uint64_t>(flags.seed), .tp = w.mesh->group(MeshDim::kTp),
                   .registry = &w.registry, .sequence_parallel = flags.sequence_parallel};
  w.stage = GptChunks(w.config, ctx, w.coord.pp, w.shape.pp, static_cast<int>(flags.virtual_stages), w.split);
  // In place (the registry's shards are the same tensors), before DDP or
  // FSDP take the parameters.
  w.stage->to(w.device);
  if (flags.strategy == "fsdp" || DpSharded(flags)) {  // gpt_hsdp.h
    auto made = MakeGptFsdp(*w.stage, *w.mesh, *w.world, flags);
    if (!made.ok()) return made.status();
    w.fsdp = std::move(*made);
  } else if (Communicator* dp = w.mesh->group(MeshDim::kDp)) {
    auto made = DistributedDataParallel::Create(*w.stage, *dp);
    if (!made.ok()) return made.status();
    w.ddp = std::move(*made);
  }
  // Under FSDP the optimizer steps this rank's shards (its state is 1/N).
  auto precision = MakeGptPrecision(flags, w.device, w.world.get());
  if (!precision.ok()) return precision.status();
  w.precision = std::move(*precision);
  std::vector<at::Tensor> params =
      w.precision->OptimizerParams(w.fsdp ? w.fsdp->parameters() : w.stage->parameters());
  if (flags.optimizer == "sgd") {
    w.optimizer = std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(flags.lr).momentum(flags.momentum));
  } else {
    w.optimizer = std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(flags.lr));
  }
  return Status::Ok();
}

// Loads --checkpoint-dir's checkpoint, if any; sets start_step.
Status Resume(GptWorker& w) {
  if (w.flags.checkpoint_dir.empty()) return Status::Ok();
  auto loaded = w.fsdp ? LoadFsdpMeshCheckpoint(w.flags.checkpoint_dir, *w.fsdp, w.registry, *w.optimizer)
                       : LoadMeshCheckpoint(w.flags.checkpoint_dir, *w.mesh, *w.stage, w.registry, *w.optimizer);
  if (!loaded.ok()) return loaded.status();
  if (!loaded->has_value()) return Status::Ok();
  w.start_step = (*loaded)->step;
  CTRUN_RETURN_IF_ERROR(w.precision->Load(w.flags.checkpoint_dir, w.start_step, w.env.rank));
  if (w.env.rank == 0) {
    std::printf("resumed from step %lld (saved by %lld ranks)\n", static_cast<long long>(w.start_step),
                static_cast<long long>((*loaded)->world_size));
    std::fflush(stdout);
  }
  return Status::Ok();
}

AppOutcome SetUp(GptWorker& w) {
  auto env = ReadDistEnv(ProcessEnv());
  if (!env.ok()) return {env.status(), kExitUsage};
  w.env = *env;
  at::set_num_threads(static_cast<int>(w.flags.threads));
  TensorMemoryMeter::Install();
  RetainFreedHeap();  // best effort: without it steps only fault more pages in
  AppOutcome chosen = ChooseShape(w);
  if (!chosen.status.ok()) return chosen;
  auto corpus = LoadTextCorpus(w.flags.data.empty() ? kDefaultCorpusDir : w.flags.data, w.flags.seq_len + 2);
  if (!corpus.ok()) return {corpus.status(), kExitUsage};
  w.corpus = std::move(*corpus);
  AppOutcome joined = JoinMesh(w);
  if (!joined.status.ok()) return joined;
  w.base_bytes = TensorMemoryMeter::CurrentBytes();
  Status made = MakeStage(w);
  if (!made.ok()) return {made};
  return {Resume(w)};
}

// The step's loss: the last stage's, averaged over the dp replicas.
Result<double> ReplicaMeanLoss(GptWorker& w, double loss) {
  if (!w.stage->last() || w.shape.dp <= 1) return loss;
  at::Tensor t = at::scalar_tensor(loss, at::TensorOptions().dtype(at::kDouble).device(w.device)).reshape({1});
  CTRUN_RETURN_IF_ERROR(WaitWork(w.mesh->group(MeshDim::kDp)->AllReduceSum(t), "all-reduce of the loss"));
  return t.item<double>() / w.shape.dp;
}

void NoteStats(GptWorker& w, int64_t step, const PipelineStepStats& stats, const CoreTime& core, RunStats& run) {
  if (step > w.start_step) {  // the first step pays for the groups' warm-up
    run.step_sum += stats.step_seconds;
    run.compute_sum += stats.compute_seconds;
    run.forward_sum += stats.forward_seconds;
    run.core_sum += core.wall_seconds;
    run.step_cpu_sum += stats.step_cpu_seconds;
    run.forward_cpu_sum += stats.forward_cpu_seconds;
    run.core_cpu_sum += core.cpu_seconds;
    ++run.measured;
  }
  run.peak_in_flight = std::max(run.peak_in_flight, stats.peak_in_flight);
  // The first step also allocates every gradient (later steps zero them in
  // place): it counts only when it is the only step.
  if (step > w.start_step || step + 1 == w.flags.steps) {
    run.peak_step_bytes = std::max(run.peak_step_bytes, stats.peak_step_bytes);
    run.step_high = std::max(run.step_high, TensorMemoryMeter::PeakBytes() - w.base_bytes);
  }
  run.peak_tensor_high = std::max(run.peak_tensor_high, TensorMemoryMeter::PeakBytes());
}

// One FSDP step (--strategy fsdp, --dp-shard): forward through the units,
// the loss, backward with the gradients reduce-scattered; the same stats as
// a Pipeline step (all of it is compute: there are no pipeline waits).
// With pp > 1 the pipeline runs the step on the gathered units.
Result<PipelineStepStats> FsdpStep(GptWorker& w, Pipeline& pipeline, const at::Tensor& tokens,
                                   const at::Tensor& targets) {
  if (w.shape.pp > 1) {
    CTRUN_RETURN_IF_ERROR(w.fsdp->GatherForStep());
    auto stats = pipeline.Step(tokens, targets);
    Status reduced = w.fsdp->ReduceAccumulatedGrads();
    if (stats.ok() && !reduced.ok()) return reduced;
    return stats;
  }
  const double start = NowSeconds(), cpu_start = ThreadCpuSeconds();
  const int64_t bytes_at_start = TensorMemoryMeter::CurrentBytes();
  TensorMemoryMeter::ResetPeak();
  auto logits = w.precision->FsdpForward(*w.fsdp, tokens);
  if (!logits.ok()) return logits.status();
  at::Tensor loss = w.precision->ScaleLoss(w.stage->Loss(*logits, targets));
  const double forward_seconds = NowSeconds() - start, forward_cpu_seconds = ThreadCpuSeconds() - cpu_start;
  CTRUN_RETURN_IF_ERROR(w.fsdp->Backward(loss));
  PipelineStepStats stats;
  stats.loss = loss.item<double>();
  stats.step_seconds = NowSeconds() - start;
  stats.compute_seconds = stats.step_seconds;
  stats.forward_seconds = forward_seconds;
  stats.step_cpu_seconds = ThreadCpuSeconds() - cpu_start;
  stats.forward_cpu_seconds = forward_cpu_seconds;
  stats.peak_in_flight = 1;
  stats.peak_step_bytes = TensorMemoryMeter::PeakBytes() - bytes_at_start;
  return stats;
}

// The checkpoint of step `step` (the loss scaler's state, then the mesh's).
Status SaveStep(GptWorker& w, int64_t step) {
  const TrainPosition position{.step = step, .epoch = 0, .epoch_consumed = 0, .world_size = w.env.world_size,
                               .seed = w.flags.seed};
  CTRUN_RETURN_IF_ERROR(w.precision->Save(w.flags.checkpoint_dir, step, w.env.rank));
  return w.fsdp ? SaveFsdpMeshCheckpoint(w.flags.checkpoint_dir, *w.mesh, *w.fsdp, w.registry, *w.optimizer, position)
                : SaveMeshCheckpoint(w.flags.checkpoint_dir, *w.mesh, *w.stage, w.registry, *w.optimizer, position);
}

// Step `step`: fault injection, the pipeline step, the tp gradient sums,
// the optimizer step, the log lines and the periodic checkpoint.
Status TrainStep(GptWorker& w, Pipeline& pipeline, int64_t step, RunStats& run) {
  const GptFlags& flags = w.flags;
  const MeshCoord& coord = w.coord;
  if (w.env.restart_count == 0 && coord.pp == flags.crash_stage && step == flags.crash_at_step) {
    std::fprintf(stderr, "ctrun-gpt: rank %d (stage %d): fault injection, SIGKILL before step %lld\n", w.env.rank,
                 coord.pp, static_cast<long long>(step));
    std::raise(SIGKILL);
  }
  const int64_t rows = flags.global_batch / w.shape.dp;
  TokenBatch batch = SampleBatch(w.corpus, step, flags.seed, flags.global_batch, flags.seq_len);
  at::Tensor tokens = batch.tokens.narrow(0, coord.dp * rows, rows).to(w.device);
  at::Tensor targets = batch.targets.narrow(0, coord.dp * rows, rows).to(w.device);
  const double iter_start = NowSeconds();
  w.optimizer->zero_grad();
  const CoreTime core_start = AttentionCoreTime();
  auto stats = w.fsdp ? FsdpStep(w, pipeline, tokens, targets) : pipeline.Step(tokens, targets);
  if (!stats.ok()) return stats.status();
  stats->loss = w.precision->UnscaleLoss(stats->loss);
  if (!w.fsdp) CTRUN_RETURN_IF_ERROR(SumPartialGrads(*w.stage, w.registry, w.mesh->group(MeshDim::kTp)));
  CTRUN_RETURN_IF_ERROR(w.precision->Step(*w.optimizer));
  if (step > w.start_step) run.iter_sum += NowSeconds() - iter_start;
  const CoreTime core_end = AttentionCoreTime();
  NoteStats(w, step, *stats,
            {.wall_seconds = core_end.wall_seconds - core_start.wall_seconds,
             .cpu_seconds = core_end.cpu_seconds - core_start.cpu_seconds},
            run);
  if (flags.show_schedule && step == w.start_step && coord.dp == 0 && coord.tp == 0) {
    std::printf("schedule stage=%d: %s\n", coord.pp, stats->order.c_str());
    std::fflush(stdout);
  }
  auto loss = ReplicaMeanLoss(w, stats->loss);
  if (!loss.ok()) return loss.status();
  const bool reporter = coord.pp == w.shape.pp - 1 && coord.dp == 0 && coord.tp == 0;
  const bool log = flags.log_every > 0 && ((step + 1) % flags.log_every == 0 || step == w.start_step ||
                                           step + 1 == flags.steps);
  if (reporter && log) {
    std::printf("step %lld loss %.8f step_time %.4f s\n", static_cast<long long>(step + 1), *loss,
                stats->step_seconds);
    std::fflush(stdout);
  }
  const bool save =
      !flags.checkpoint_dir.empty() && ((step + 1) % flags.checkpoint_every == 0 || step + 1 == flags.steps);
  return save ? SaveStep(w, step + 1) : Status::Ok();
}

// Parameter + gradient + optimizer-state bytes held between steps, and
// that plus the most the data-parallel wrapper holds within a step (the
// method of bench/fsdp.sh: tensor storage, each once; activations are not
// in it): DDP's buckets (the gradients are views of them); FSDP's gathered
// units and gradient/reduce buffers. And FSDP's largest unit, full size.
struct StateBytes {
  int64_t state = 0, peak = 0, max_unit = 0;
  int64_t peak_sum = 0;  // FSDP: state + the two kinds' separate peaks (an upper bound of peak)
};
StateBytes CountStateBytes(GptWorker& w) {
  StateBytes out;
  const int64_t optim = OptimizerStateBytes(*w.optimizer);
  if (w.fsdp) {
    const FsdpMemory m = w.fsdp->Memory();
    out.state = m.shard_param_bytes + m.shard_grad_bytes + optim;
    out.peak = out.state + m.peak_held_bytes;
    out.peak_sum = out.state + m.peak_gathered_bytes + m.peak_grad_buffer_bytes;
    out.max_unit = m.max_unit_bytes;
    return out;
  }
  std::vector<at::Tensor> params = w.stage->parameters(), grads;
  for (const auto& p : params) grads.push_back(p.grad());
  out.state = StorageBytes(params) + StorageBytes(grads) + optim;
  if (w.ddp) {
    for (const auto& flat : w.ddp->Buckets()) grads.push_back(flat);
  }
  out.peak = StorageBytes(params) + StorageBytes(grads) + optim;
  out.peak_sum = out.peak;
  return out;
}

double PerStep(double sum, int measured) { return measured > 0 ? sum / measured : 0.0; }

void PrintStats(GptWorker& w, const RunStats& run) {
  int64_t param_bytes = 0;
  for (const auto& p : w.stage->parameters()) param_bytes += p.numel() * p.element_size();
  if (w.fsdp) param_bytes = w.fsdp->Memory().shard_param_bytes;
  const StateBytes bytes = CountStateBytes(w);
  const int measured = run.measured;
  std::fprintf(stderr,
               "STATS rank=%d stage=%d dp=%d tp=%d steps=%d step_s=%.6f compute_s=%.6f bubble=%.4f peak_in_flight=%d "
               "param_bytes=%lld peak_step_bytes=%lld peak_tensor_bytes=%lld peak_rss_kb=%lld iter_s=%.6f "
               "state_bytes=%lld peak_bytes=%lld peak_sum_bytes=%lld max_unit_bytes=%lld step_high_bytes=%lld "
               "skipped_steps=%lld fwd_s=%.6f core_s=%.6f step_cpu_s=%.6f fwd_cpu_s=%.6f core_cpu_s=%.6f\n",
               w.env.rank, w.coord.pp, w.coord.dp, w.coord.tp, measured, measured ? run.step_sum / measured : 0.0,
               measured ? run.compute_sum / measured : 0.0,
               run.step_sum > 0 ? 1.0 - run.compute_sum / run.step_sum : 0.0, run.peak_in_flight,
               static_cast<long long>(param_bytes), static_cast<long long>(run.peak_step_bytes),
               static_cast<long long>(run.peak_tensor_high), static_cast<long long>(PeakRssKb()),
               measured ? run.iter_sum / measured : 0.0, static_cast<long long>(bytes.state),
               static_cast<long long>(bytes.peak), static_cast<long long>(bytes.peak_sum),
               static_cast<long long>(bytes.max_unit),
               static_cast<long long>(run.step_high), static_cast<long long>(w.precision->skipped_steps()),
               PerStep(run.forward_sum, measured), PerStep(run.core_sum, measured), PerStep(run.step_cpu_sum, measured),
               PerStep(run.forward_cpu_sum, measured), PerStep(run.core_cpu_sum, measured));
}

AppOutcome Run(const GptFlags& flags) {
  GptWorker w(flags);
  if (Status ft = flags.ft ? CheckGptFtEnvironment() : Status::Ok(); !ft.ok()) return {ft, kExitUsage};
  AppOutcome set_up = SetUp(w);
  if (!set_up.status.ok()) return set_up;
  if (flags.ft) {  // preemption stays off under --ft (preempt_save.h: MakePreemptCheck)
    Status ft = TrainGptFt({flags, w.env, w.corpus, w.device, *w.stage, w.ddp.get(), w.fsdp.get(), *w.optimizer});
    return {ft, ft.ok() ? kExitOk : kExitFailure};
  }
  std::unique_ptr<PreemptCheck> preempt = MakePreemptCheck(*w.world, w.device);
  const PreemptSite site{preempt.get(), w.world.get(), w.device, !flags.checkpoint_dir.empty()};
  Pipeline pipeline(w.precision->Stages(w.stage->PipelineChunks()), w.mesh->group(MeshDim::kPp), w.ddp.get(),
                    flags.schedule, static_cast<int>(flags.micro_batches));
  RunStats run;
  for (int64_t step = w.start_step; step < flags.steps; ++step) {
    Status stepped = TrainStep(w, pipeline, step, run);
    if (!stepped.ok()) return {stepped};
    if (step + 1 == flags.steps) break;  // the last step: saved, and the run ends anyway
    const bool saved = (step + 1) % flags.checkpoint_every == 0;
    auto outcome = PreemptAtBoundary(site, step + 1, [&] { return saved ? Status::Ok() : SaveStep(w, step + 1); });
    if (!outcome.ok()) return {outcome.status()};
    if (*outcome != PreemptOutcome::kNone) {
      return {Status::Ok(), *outcome == PreemptOutcome::kSaved ? kExitOk : kExitFailure};
    }
  }
  PrintStats(w, run);
  if (!flags.dump_params.empty() && (w.coord.dp == 0 || w.fsdp)) {
    auto params = FullParams(*w.stage, w.fsdp.get());
    if (!params.ok()) return {params.status()};
    if (w.coord.dp == 0) {
      Status dumped = DumpParams(flags.dump_params, w.coord, *params, w.registry);
      if (!dumped.ok()) return {dumped};
    }
  }
  Status done = WaitWork(w.world->Barrier(), "final barrier");
  return {done, done.ok() ? kExitOk : kExitFailure};
}

}  // namespace
}  // namespace ctrun::trainer

int main(int argc, char** argv) {
  using namespace ctrun::trainer;
  StartApp(argc, argv);
  auto flags = ParseGptFlags(AppArgs(argc, argv));
  if (!flags.ok()) return EndWithError("ctrun-gpt", flags.status(), kExitUsage);
  if (flags->help) return std::fputs(GptUsage().c_str(), stdout) < 0 ? kExitFailure : kExitOk;
  // With an OK outcome: 0, or 1 after a preemption notice without --checkpoint-dir.
  return FinishApp("ctrun-gpt", [&] { return Run(*flags); });
}
