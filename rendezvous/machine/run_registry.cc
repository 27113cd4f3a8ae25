#include "rendezvous/machine/run_registry.h"

#include <algorithm>
#include <utility>

namespace ctrun::rdzv {
namespace {

std::string NodesSpec(const Params& p) { return std::to_string(p.min_nodes) + ":" + std::to_string(p.max_nodes); }

// Run ids a NotFound message names at most.
constexpr size_t kNamedRuns = 8;

Status CheckRunId(const std::string& run_id) {
  if (run_id.empty()) {
    return Status::InvalidArgument("--rdzv-id '': the run id must not be empty (give the same --rdzv-id to every node)");
  }
  if (run_id.size() > kMaxRunIdBytes) {
    return Status::InvalidArgument("--rdzv-id '" + run_id.substr(0, 32) + "...' is " + std::to_string(run_id.size()) +
                                   " bytes: give a run id of at most 128 bytes");
  }
  return Status::Ok();
}

}  // namespace

Status RunRegistry::CheckSameNodes(const std::string& run_id, const RendezvousMachine& machine,
                                   const Params& params) const {
  const Params& have = machine.params();
  if (have.min_nodes == params.min_nodes && have.max_nodes == params.max_nodes) return Status::Ok();
  return Status::FailedPrecondition("--nnodes '" + NodesSpec(params) + "' for run '" + run_id +
                                    "': the run was started with --nnodes '" + NodesSpec(have) +
                                    "' (give every node the same --nnodes)");
}

Status RunRegistry::Add(const std::string& run_id, const Params& params) {
  CTRUN_RETURN_IF_ERROR(CheckRunId(run_id));
  auto it = runs_.find(run_id);
  if (it != runs_.end()) return CheckSameNodes(run_id, it->second, params);
  Result<RendezvousMachine> machine = RendezvousMachine::Create(params);
  if (!machine.ok()) return machine.status();
  runs_.emplace(run_id, std::move(machine).value());
  return Status::Ok();
}

std::string RunRegistry::Served() const {
  std::string served;
  size_t named = 0;
  for (const auto& [id, machine] : runs_) {
    if (named++ == kNamedRuns) {
      served += " and " + std::to_string(runs_.size() - kNamedRuns) + " more";
      break;
    }
    served += (served.empty() ? "'" : ", '") + id + "'";
  }
  return served;
}

Result<std::string> RunRegistry::OnlyRunId() const {
  if (runs_.size() == 1) return runs_.begin()->first;
  if (runs_.empty()) return Status::NotFound("this server serves no run yet");
  return Status::NotFound("this server serves " + std::to_string(runs_.size()) + " runs (" + Served() +
                          "): name one with --rdzv-id");
}

Result<RendezvousMachine*> RunRegistry::Find(const std::string& run_id, Asker asker) {
  auto it = runs_.find(run_id);
  if (it != runs_.end()) return &it->second;
  std::string served = Served();
  if (served.empty()) served = "no run yet";
  // A late node of a run that ended: the id is unknown now, not closed.
  if (ttl_) served += "; a closed run is forgotten after ctrund's --closed-run-ttl";
  const std::string quoted = run_id.size() > kMaxRunIdBytes ? run_id.substr(0, 32) + "..." : run_id;
  if (asker == Asker::kQuery) return Status::NotFound("run '" + quoted + "' is not served here (serving " + served + ")");
  return Status::NotFound("--rdzv-id '" + quoted + "' is not served here (serving " + served +
                          "): give every node the same --rdzv-id");
}

Result<RendezvousMachine*> RunRegistry::FindForJoin(const std::string& run_id, const Params& params) {
  CTRUN_RETURN_IF_ERROR(CheckRunId(run_id));
  auto it = runs_.find(run_id);
  if (it != runs_.end()) {
    CTRUN_RETURN_IF_ERROR(CheckSameNodes(run_id, it->second, params));
    return &it->second;
  }
  if (mode_ == Mode::kFixed) return Find(run_id);
  CTRUN_RETURN_IF_ERROR(Add(run_id, params));
  return &runs_.at(run_id);
}

bool RunRegistry::Remove(const std::string& run_id) {
  if (auto at = forget_at_.find(run_id); at != forget_at_.end()) {
    forget_order_.erase({at->second, run_id});
    forget_at_.erase(at);
  }
  return runs_.erase(run_id) > 0;
}

void RunRegistry::NoteStepped(const std::string& run_id, TimePoint now) {
  if (!ttl_ || forget_at_.count(run_id)) return;
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return;
  const Counts c = it->second.Tally();
  if (!c.closed || c.live_nodes > 0) return;
  forget_at_.emplace(run_id, now + *ttl_);
  forget_order_.emplace(now + *ttl_, run_id);
}

std::vector<std::string> RunRegistry::ForgetDue(TimePoint now) {
  std::vector<std::string> gone;
  while (!forget_order_.empty() && forget_order_.begin()->first <= now) {
    gone.push_back(forget_order_.begin()->second);
    forget_order_.erase(forget_order_.begin());
  }
  for (const std::string& id : gone) {
    forget_at_.erase(id);
    runs_.erase(id);
  }
  std::sort(gone.begin(), gone.end());
  return gone;
}

std::optional<TimePoint> RunRegistry::NextForget() const {
  if (forget_order_.empty()) return std::nullopt;
  return forget_order_.begin()->first;
}

std::vector<std::string> RunRegistry::RunIds() const {
  std::vector<std::string> ids;
  for (const auto& [id, machine] : runs_) ids.push_back(id);
  return ids;
}

}  // namespace ctrun::rdzv
