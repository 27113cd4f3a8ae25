#include "trainer/comm/process_group.h"

#include "trainer/comm/reduce_scatter.h"
#include "trainer/comm/torch_error.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#if defined(CTRUN_TRAINER_GLOO)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

#include <csignal>
#include <cstdlib>
#include <functional>
#include <optional>

#if defined(CTRUN_TRAINER_CUDA)
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace ctrun::trainer {
namespace {

// torch 2.x's NCCL group warns at exit unless it was shut down first
// ("destroy_process_group() was not called"), and guesses the device of a
// barrier unless one is bound to it; torch 1.x has neither call. Templates,
// so that each is compiled only where the group has it.
template <typename G>
void ShutDownIfAble(G& group) {
  if constexpr (requires { group.shutdown(); }) {
    try {
      group.shutdown();
    } catch (const std::exception&) {
      // Exiting anyway: a group that cannot shut down cleanly is left as is.
    }
  }
}

template <typename G>
void BindDeviceIfAble(G& group, c10::DeviceIndex index) {
  if constexpr (requires { group.setBoundDeviceId(std::optional<at::Device>(at::Device(at::kCUDA, index))); }) {
    group.setBoundDeviceId(std::optional<at::Device>(at::Device(at::kCUDA, index)));
  }
}

// Adapts a c10d group (ProcessGroup in torch 1.x, Backend in 2.x: both have
// these members) to Communicator.
template <typename Group>
class C10dCommunicator final : public Communicator {
 public:
  // `make_group(store, rank, size)` builds a group of the same backend and
  // options over another store (for NewGroup).
  using MakeGroup = std::function<c10::intrusive_ptr<Group>(const c10::intrusive_ptr<c10d::Store>&, int, int)>;
  C10dCommunicator(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<Group> group,
                   std::string backend, int rank, int size, MakeGroup make_group)
      : store_(std::move(store)), group_(std::move(group)), backend_(std::move(backend)),
        rank_(rank), size_(size), make_group_(std::move(make_group)) {}
  ~C10dCommunicator() override {
    if (backend_ == "nccl") ShutDownIfAble(*group_);
  }
  C10dCommunicator(const C10dCommunicator&) = delete;
  C10dCommunicator& operator=(const C10dCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return backend_; }

  c10::intrusive_ptr<c10d::Work> AllReduceSum(at::Tensor& tensor) override {
    std::vector<at::Tensor> tensors{tensor};
    return group_->allreduce(tensors);
  }
  c10::intrusive_ptr<c10d::Work> Broadcast(std::vector<at::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions options;
    options.rootRank = root;
    return group_->broadcast(tensors, options);
  }
  c10::intrusive_ptr<c10d::Work> Barrier() override { return group_->barrier(); }

  c10::intrusive_ptr<c10d::Work> AllGather(at::Tensor& shard, at::Tensor& full) override {
    if (backend_ == "nccl") return group_->_allgather_base(full, shard);
    // Gloo 1.13: list all-gather into views of `full` (it copies into them
    // before completing); bf16 travels as int16.
    std::vector<at::Tensor> inputs{MovableView(shard)};
    at::Tensor movable_full = MovableView(full);
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < size_; ++r) {
      outputs[0].push_back(movable_full.narrow(0, r * shard.numel(), shard.numel()));
    }
    return group_->allgather(outputs, inputs);
  }
  c10::intrusive_ptr<c10d::Work> ReduceScatterSum(at::Tensor& full, at::Tensor& shard) override {
    if (backend_ == "nccl") return group_->_reduce_scatter_base(shard, full);
    auto all_to_all = [this](at::Tensor& output, at::Tensor& input) {
      std::vector<int64_t> equal_split;
      return group_->alltoall_base(output, input, equal_split, equal_split);
    };
    return ReduceScatterByAllToAll(all_to_all, size_, full, shard);
  }

  c10::intrusive_ptr<c10d::Work> AllReduceMax(at::Tensor& tensor) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::MAX;
    return group_->allreduce(tensors, options);
  }
  c10::intrusive_ptr<c10d::Work> Send(at::Tensor& tensor, int peer, int tag) override {
    std::vector<at::Tensor> tensors{tensor};
    return group_->send(tensors, peer, tag);
  }
  c10::intrusive_ptr<c10d::Work> Recv(at::Tensor& tensor, int peer, int tag) override {
    std::vector<at::Tensor> tensors{tensor};
    return group_->recv(tensors, peer, tag);
  }

  Result<std::shared_ptr<Communicator>> NewGroup(const std::string& name,
                                                 const std::vector<int>& ranks) override {
    int my_index = -1;
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] < 0 || ranks[i] >= size_ || (i > 0 && ranks[i] <= ranks[i - 1])) {
        return Status::InvalidArgument("group '" + name + "': ranks must be ascending ranks of the group");
      }
      if (ranks[i] == rank_) my_index = static_cast<int>(i);
    }
    if (my_index < 0) {
      return Status::InvalidArgument("group '" + name + "': rank " + std::to_string(rank_) +
                                     " is not a member");
    }
    const int size = static_cast<int>(ranks.size());
    try {
      auto store = c10::make_intrusive<c10d::PrefixStore>("group/" + name, store_);
      auto group = make_group_(store, my_index, size);
      return std::shared_ptr<Communicator>(std::make_shared<C10dCommunicator<Group>>(
          store, group, backend_, my_index, size, make_group_));
    } catch (const std::exception& error) {
      return Status::Unavailable("cannot form the sub-group '" + name + "' of " + std::to_string(size) +
                                 " ranks: " + TorchErrorLine(error));
    }
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;  // outlives group_ (declared first)
  c10::intrusive_ptr<Group> group_;
  std::string backend_;
  int rank_;
  int size_;
  MakeGroup make_group_;
};

#if defined(CTRUN_TRAINER_GLOO)
bool IsLoopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

std::shared_ptr<::gloo::transport::Device> GlooDevice(const DistEnv& env) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  if (IsLoopback(env.master_addr)) {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}
#endif

}  // namespace

Status WaitWork(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) {
  try {
    work->wait();
  } catch (const std::exception& error) {
    return Status::Unavailable(what + " failed (a peer rank exited or timed out): " +
                               TorchErrorLine(error));
  }
  return Status::Ok();
}

Result<CommBackend> ParseCommBackend(const std::string& name) {
  if (name == "gloo") return CommBackend::kGloo;
  if (name == "nccl") return CommBackend::kNccl;
  return Status::InvalidArgument("--backend '" + name + "': unknown (use gloo or nccl)");
}

bool HaveNccl() {
#if defined(CTRUN_TRAINER_CUDA)
  return true;
#else
  return false;
#endif
}

Result<std::shared_ptr<Communicator>> ConnectProcessGroup(const DistEnv& env,
                                                          const ProcessGroupOptions& options) {
  const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<std::uint16_t>(env.master_port);
    store_options.timeout = options.timeout;
    if (env.use_agent_store) {
      store_options.isServer = false;
      store = c10::make_intrusive<c10d::PrefixStore>(
          env.StorePrefix(), c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options));
    } else {
      store_options.isServer = env.rank == 0;
      store_options.numWorkers = env.world_size;
      store_options.waitWorkers = true;
      store_options.multiTenant = true;
      store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
    }
  } catch (const std::exception& error) {
    return Status::Unavailable("cannot reach the c10d store at MASTER_ADDR:MASTER_PORT=" + where +
                               " within " + std::to_string(options.timeout.count() / 1000) +
                               " s (is rank 0 running and the port free?): " + TorchErrorLine(error));
  }

  try {
    if (options.backend == CommBackend::kNccl) {
#if defined(CTRUN_TRAINER_CUDA)
      c10::cuda::set_device(static_cast<c10::DeviceIndex>(env.local_rank));
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = options.timeout;
      const auto device_index = static_cast<c10::DeviceIndex>(env.local_rank);
      auto make_group = [nccl_options, device_index](const c10::intrusive_ptr<c10d::Store>& s, int rank,
                                                     int size) {
        auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(s, rank, size, nccl_options);
        BindDeviceIfAble(*group, device_index);
        return group;
      };
      auto group = make_group(store, env.rank, env.world_size);
      return std::shared_ptr<Communicator>(std::make_shared<C10dCommunicator<c10d::ProcessGroupNCCL>>(
          store, group, "nccl", env.rank, env.world_size, make_group));
#else
      return Status::FailedPrecondition(
          "--backend nccl: this build has no CUDA/NCCL path (rebuild with "
          "-DCTRUN_TRAINER_CUDA=ON against a CUDA libtorch, or use --backend gloo)");
#endif
    }
#if defined(CTRUN_TRAINER_GLOO)
    // Gloo writes to its peers with writev, which raises SIGPIPE once a peer
    // has died, and SIGPIPE's default action ends this process without a
    // word (a C++ worker's rank 0 then exited with nothing on stderr). Python
    // ignores SIGPIPE from its start, so torch's workers never meet it; ours
    // ignore it from here, and the failed collective reports its peer.
    std::signal(SIGPIPE, SIG_IGN);
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
    gloo_options->devices.push_back(GlooDevice(env));
    gloo_options->threads = options.gloo_threads;
    auto make_group = [gloo_options](const c10::intrusive_ptr<c10d::Store>& s, int rank, int size) {
      return c10::make_intrusive<c10d::ProcessGroupGloo>(s, rank, size, gloo_options);
    };
    auto group = make_group(store, env.rank, env.world_size);
    return std::shared_ptr<Communicator>(std::make_shared<C10dCommunicator<c10d::ProcessGroupGloo>>(
        store, group, "gloo", env.rank, env.world_size, make_group));
#else
    return Status::FailedPrecondition(
        "--backend gloo: this build has no Gloo (the libtorch it was built against ships no Gloo "
        "headers, as PyTorch's wheels do not): use --backend nccl, or build against Debian's libtorch-dev");
#endif
  } catch (const std::exception& error) {
    return Status::Unavailable("cannot form the process group of " +
                               std::to_string(env.world_size) + " ranks via the store at " +
                               where + ": " + TorchErrorLine(error));
  }
}

}  // namespace ctrun::trainer
