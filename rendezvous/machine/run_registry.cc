#include "rendezvous/machine/run_registry.h"

#include <utility>

namespace ctrun::rdzv {
namespace {

std::string NodesSpec(const Params& p) { return std::to_string(p.min_nodes) + ":" + std::to_string(p.max_nodes); }

Status CheckRunId(const std::string& run_id) {
  if (!run_id.empty()) return Status::Ok();
  return Status::InvalidArgument("--rdzv-id '': the run id must not be empty (give the same --rdzv-id to every node)");
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

Result<RendezvousMachine*> RunRegistry::Find(const std::string& run_id) {
  auto it = runs_.find(run_id);
  if (it != runs_.end()) return &it->second;
  std::string served;
  for (const auto& [id, machine] : runs_) served += (served.empty() ? "'" : ", '") + id + "'";
  return Status::NotFound("--rdzv-id '" + run_id + "' is not served here (serving " +
                          (served.empty() ? std::string("no run yet") : served) +
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

bool RunRegistry::Remove(const std::string& run_id) { return runs_.erase(run_id) > 0; }

std::vector<std::string> RunRegistry::RunIds() const {
  std::vector<std::string> ids;
  for (const auto& [id, machine] : runs_) ids.push_back(id);
  return ids;
}

}  // namespace ctrun::rdzv
