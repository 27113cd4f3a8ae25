#include "rendezvous/grpc_process.h"

#include <absl/synchronization/mutex.h>

namespace ctrun::rdzv {

void ConfigureGrpcProcess() { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); }

}  // namespace ctrun::rdzv
