#include "rendezvous/grpc/server/run_states.h"

#include <spdlog/spdlog.h>

#include <chrono>

namespace ctrun::rdzv {

void RunStates::Save(const std::string& run_id, const RendezvousMachine& machine, bool changed) {
  if (!store_ || !changed) return;
  Status s = store_->Save(StoredRun{run_id, machine.Export()},
                          ClockPair{Clock::now(), std::chrono::system_clock::now()});
  if (!s.ok()) {
    spdlog::error("rendezvous run '{}': {}; a restarted ctrund would resume an older state", run_id, s.message());
  }
}

void RunStates::Remove(const std::string& run_id) {
  if (!store_) return;
  if (Status s = store_->Remove(run_id); !s.ok()) {
    spdlog::warn("rendezvous run '{}': {}; a restarted ctrund would resume it as a closed run", run_id,
                 s.message());
  }
}

}  // namespace ctrun::rdzv
