// Communicator's defaults for the calls only the c10d communicator
// implements (test fakes inherit these).
#include "trainer/comm/communicator.h"

#include <stdexcept>

namespace ctrun::trainer {

c10::intrusive_ptr<c10d::Work> Communicator::AllReduceMax(at::Tensor&) {
  throw std::logic_error("this communicator has no max all-reduce");
}
c10::intrusive_ptr<c10d::Work> Communicator::Send(at::Tensor&, int, int) {
  throw std::logic_error("this communicator has no point-to-point send");
}
c10::intrusive_ptr<c10d::Work> Communicator::Recv(at::Tensor&, int, int) {
  throw std::logic_error("this communicator has no point-to-point receive");
}
Result<std::shared_ptr<Communicator>> Communicator::NewGroup(const std::string& name,
                                                             const std::vector<int>&) {
  return Status::FailedPrecondition("group '" + name + "': this communicator cannot make sub-groups");
}

}  // namespace ctrun::trainer
