#include "trainer/comm/reduce_scatter.h"

#include <ATen/ATen.h>

#include "trainer/comm/communicator.h"

namespace ctrun::trainer {
namespace {

class ThenWorkImpl final : public c10d::Work {
 public:
  ThenWorkImpl(c10::intrusive_ptr<c10d::Work> inner, std::function<void()> then)
      : inner_(std::move(inner)), then_(std::move(then)) {}
  bool isCompleted() override { return done_ || inner_->isCompleted(); }
  bool isSuccess() const override { return inner_->isSuccess(); }
  bool wait(std::chrono::milliseconds timeout) override {
    if (done_) return true;
    inner_->wait(timeout);
    done_ = true;
    if (then_) {
      at::NoGradGuard no_grad;
      then_();
    }
    then_ = nullptr;
    return true;
  }

 private:
  c10::intrusive_ptr<c10d::Work> inner_;
  std::function<void()> then_;
  bool done_ = false;
};

}  // namespace

c10::intrusive_ptr<c10d::Work> ThenWork(c10::intrusive_ptr<c10d::Work> inner,
                                        std::function<void()> then) {
  return c10::make_intrusive<ThenWorkImpl>(std::move(inner), std::move(then));
}

at::Tensor MovableView(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 ? t.view(at::kHalf) : t;
}

c10::intrusive_ptr<c10d::Work> ReduceScatterByAllToAll(const AllToAllFn& all_to_all, int size,
                                                       at::Tensor& full, at::Tensor& shard) {
  at::Tensor received = at::empty_like(full);
  at::Tensor out = MovableView(received);
  at::Tensor in = MovableView(full);
  auto work = all_to_all(out, in);
  at::Tensor target = shard;
  return ThenWork(std::move(work), [received, target, size]() mutable {
    target.copy_(received.view({size, -1}).to(at::kFloat).sum(0));
  });
}

c10::intrusive_ptr<c10d::Work> Communicator::AllGather(at::Tensor& shard, at::Tensor& full) {
  at::NoGradGuard no_grad;
  full.zero_();
  full.narrow(0, rank() * shard.numel(), shard.numel()).copy_(shard.reshape({-1}));
  return AllReduceSum(full);
}

c10::intrusive_ptr<c10d::Work> Communicator::ReduceScatterSum(at::Tensor& full, at::Tensor& shard) {
  auto work = AllReduceSum(full);
  at::Tensor chunk = full.narrow(0, rank() * shard.numel(), shard.numel());
  at::Tensor target = shard;
  return ThenWork(std::move(work), [chunk, target]() mutable { target.copy_(chunk); });
}

}  // namespace ctrun::trainer
