#include "trainer/parallel/recompute.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/ivalue.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <mutex>
#include <utility>

namespace ctrun::trainer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What backward needs besides the saved tensors; held by the autograd node.
struct RecomputeState : torch::CustomClassHolder {
  RecomputeFn fn;
  size_t num_inputs = 0;
  bool preserve_rng_state = true;
  at::Tensor rng_state;  // the CPU generator's state at forward
};

at::Tensor CpuRngState() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void SetCpuRngState(const at::Tensor& state) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// fn on `inputs` with grad on and the generator as it was at forward; the
// generator is put back as it is now, whatever fn throws.
variable_list RunAgain(const RecomputeState& state, const variable_list& inputs) {
  struct RngRestore {
    at::Tensor saved;
    ~RngRestore() {
      if (saved.defined()) SetCpuRngState(saved);
    }
  } restore;
  if (state.preserve_rng_state) {
    restore.saved = CpuRngState();
    SetCpuRngState(state.rng_state);
  }
  torch::AutoGradMode grad_on(true);
  return state.fn(inputs);
}

struct RecomputeFunction : public torch::autograd::Function<RecomputeFunction> {
  // `tensors`: the inputs, then the parameters.
  static variable_list forward(AutogradContext* ctx, c10::intrusive_ptr<RecomputeState> state,
                               at::TensorList tensors) {
    ctx->save_for_backward(tensors.vec());
    if (state->preserve_rng_state) state->rng_state = CpuRngState();
    variable_list inputs(tensors.begin(), tensors.begin() + static_cast<std::ptrdiff_t>(state->num_inputs));
    variable_list outputs = state->fn(inputs);  // grad is off here
    ctx->saved_data["state"] = c10::IValue::make_capsule(std::move(state));
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto state = c10::static_intrusive_pointer_cast<RecomputeState>(ctx->saved_data["state"].toCapsule());
    const variable_list saved = ctx->get_saved_variables();
    variable_list detached;
    for (size_t i = 0; i < state->num_inputs; ++i) {
      detached.push_back(saved[i].detach());
      detached.back().requires_grad_(saved[i].requires_grad());
    }
    const variable_list outputs = RunAgain(*state, detached);

    // Differentiate what can be: outputs with a graph and a gradient, with
    // respect to the tensors that require grad.
    variable_list roots, root_grads, wrt;
    for (size_t i = 0; i < outputs.size() && i < grad_outputs.size(); ++i) {
      if (outputs[i].requires_grad() && grad_outputs[i].defined()) {
        roots.push_back(outputs[i]);
        root_grads.push_back(grad_outputs[i]);
      }
    }
    std::vector<size_t> where;  // index into `saved` of each of wrt
    for (size_t i = 0; i < saved.size(); ++i) {
      const at::Tensor& t = i < state->num_inputs ? detached[i] : saved[i];
      if (t.requires_grad()) {
        wrt.push_back(t);
        where.push_back(i);
      }
    }
    variable_list result(1 + saved.size());  // [0]: the state, no gradient
    if (roots.empty() || wrt.empty()) return result;
    variable_list grads = torch::autograd::grad(roots, wrt, root_grads, /*retain_graph=*/false,
                                                /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t j = 0; j < where.size(); ++j) result[1 + where[j]] = grads[j];
    return result;
  }
};

}  // namespace

std::vector<at::Tensor> Recompute(RecomputeFn fn, const std::vector<at::Tensor>& inputs,
                                  const std::vector<at::Tensor>& params, bool preserve_rng_state) {
  auto state = c10::make_intrusive<RecomputeState>();
  state->fn = std::move(fn);
  state->num_inputs = inputs.size();
  state->preserve_rng_state = preserve_rng_state;
  std::vector<at::Tensor> tensors = inputs;
  tensors.insert(tensors.end(), params.begin(), params.end());
  return RecomputeFunction::apply(std::move(state), at::TensorList(tensors));
}

}  // namespace ctrun::trainer
