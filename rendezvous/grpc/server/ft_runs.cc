#include "rendezvous/grpc/server/ft_runs.h"

#include <cstdio>

#include "rendezvous/machine/run_registry.h"

namespace ctrun::rdzv {
namespace {

// `s` cut for a message: an oversize input is named by its start.
std::string Quoted(const std::string& s) { return "'" + (s.size() > 32 ? s.substr(0, 32) + "...'" : s + "'"); }

std::string Describe(const QuorumParams& p) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%d:%d, join timeout %g s, heartbeat timeout %g s", p.min_replicas, p.max_replicas,
                std::chrono::duration<double>(p.join_timeout).count(),
                std::chrono::duration<double>(p.heartbeat_timeout).count());
  return buf;
}

Status CheckBytes(const std::string& what, const std::string& value, size_t min, size_t max, const char* fix) {
  if (value.size() >= min && value.size() <= max) return Status::Ok();
  return Status::InvalidArgument(what + " " + Quoted(value) + " is " + std::to_string(value.size()) + " bytes: " + fix);
}

Status CheckRun(const std::string& run_id) {
  return CheckBytes("fault-tolerance run id", run_id, 1, kMaxRunIdBytes,
                    "give the same --rdzv-id of 1..128 bytes to every group");
}

bool IsControl(char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }

// `s` with its control characters (a newline too) as spaces: it goes into
// log lines and the agents' line protocol.
std::string OneLine(std::string s) {
  for (char& c : s) c = IsControl(c) ? ' ' : c;
  return s;
}

Status CheckGroup(const std::string& group) {
  CTRUN_RETURN_IF_ERROR(
      CheckBytes("replica group id", group, 1, kMaxFtGroupBytes, "give each replica group an id of 1..128 bytes"));
  for (char c : group) {
    if (IsControl(c)) {
      return Status::InvalidArgument("replica group id " + Quoted(OneLine(group)) +
                                     " has a control character: give an id of printable characters");
    }
  }
  return Status::Ok();
}

Status CheckNode(const std::string& group, const std::string& node) {
  CTRUN_RETURN_IF_ERROR(CheckBytes("replica group '" + group + "': node id", node, 0, kMaxFtGroupBytes,
                                   "give each node an id of at most 128 bytes"));
  for (char c : node) {
    if (IsControl(c)) {
      return Status::InvalidArgument("replica group '" + group + "': node id " + Quoted(OneLine(node)) +
                                     " has a control character: give an id of printable characters");
    }
  }
  return Status::Ok();
}

std::string Count(size_t n, const std::string& noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

std::string Names(const std::vector<QuorumMember>& members) {
  std::string out;
  for (size_t i = 0; i < members.size() && i < 8; ++i) out += (i ? ", " : "") + members[i].id;
  if (members.size() > 8) out += ", ...";
  return out;
}

}  // namespace

Result<FtRuns::Run*> FtRuns::RunFor(const std::string& run_id, const QuorumParams& params, TimePoint now) {
  CTRUN_RETURN_IF_ERROR(CheckRun(run_id));
  if (auto it = runs_.find(run_id); it != runs_.end()) {
    if (it->second.params == params) return &it->second;
    return Status::FailedPrecondition("fault-tolerance run '" + run_id + "' has --ft-replicas " +
                                      Describe(it->second.params) + "; this group gave " + Describe(params) +
                                      ": give every group the same fault-tolerance settings");
  }
  CTRUN_RETURN_IF_ERROR(CheckQuorumParams(params));
  if (runs_.size() >= limits_.max_runs) {
    return Status::ResourceExhausted("fault-tolerance run '" + run_id + "' refused: this server already serves " +
                                     std::to_string(limits_.max_runs) +
                                     " fault-tolerance runs (the most it takes); end one, or use another server");
  }
  Run& run = runs_.emplace(run_id, Run(params)).first->second;
  run.idle_since = now;
  return &run;
}

// A group counts while it is active or its watch is open (a group that
// left keeps its watch).
Status FtRuns::Admit(Run& run, const std::string& run_id, const std::string& group) const {
  if (run.known.count(group) || run.known.size() < limits_.max_groups) return Status::Ok();
  return Status::ResourceExhausted("fault-tolerance run '" + run_id + "' refused group " + Quoted(group) +
                                   ": it already has " + std::to_string(limits_.max_groups) +
                                   " replica groups (the most a run takes); use fewer, larger groups");
}

Status FtRuns::Sync(const std::string& run_id, const QuorumParams& params, const SyncCall& call, int64_t part,
                    int64_t parts, uint64_t call_id, TimePoint now, FtOutput& out) {
  CTRUN_RETURN_IF_ERROR(CheckGroup(call.group));
  CTRUN_RETURN_IF_ERROR(CheckBytes("replica group '" + call.group + "': healing address", call.address, 0,
                                   kMaxFtAddressBytes, "give an address of at most 1024 bytes"));
  Result<Run*> found = RunFor(run_id, params, now);
  if (!found.ok()) return found.status();
  Run& run = **found;
  CTRUN_RETURN_IF_ERROR(Admit(run, run_id, call.group));
  CTRUN_RETURN_IF_ERROR(run.held.Check(call, part, parts));
  if (run.finished_step) {  // the run is over: nothing is left to train
    const SyncAnswer finished{.group = call.group, .commit = std::nullopt, .quorum = std::make_shared<const Quorum>(),
                              .finished_step = run.finished_step};
    for (uint64_t held : run.held.Take(call.group)) out.answers.emplace_back(held, finished);
    out.answers.emplace_back(call_id, finished);
    return Status::Ok();
  }
  if (!run.held.holds(call.group, part) && HeldCalls() >= limits_.max_held_calls) {
    return Status::ResourceExhausted("the quorum server refused the FtSync of replica group '" + call.group +
                                     "': it holds " + std::to_string(limits_.max_held_calls) +
                                     " calls already (the most it holds); use fewer nodes per group or fewer runs "
                                     "on this server");
  }
  run.active.insert(call.group);
  run.known.insert(call.group);
  run.left.erase(call.group);
  Rewatch(run, call.group, now);
  if (std::optional<uint64_t> replaced = run.held.Hold(call, part, parts, call_id)) {
    const std::string which = parts > 1 ? "part " + std::to_string(part) + " of group '" : "group '";
    out.ended_calls.emplace_back(*replaced, Status::Aborted("this FtSync of " + which + call.group +
                                                            "' was replaced by a newer one from the same " +
                                                            (parts > 1 ? "node" : "group")));
  }
  StepParts(run, call.group, now, out);
  Settle(run_id, run, now, out);
  return Status::Ok();
}

size_t FtRuns::HeldCalls() const {
  size_t n = 0;
  for (const auto& [id, run] : runs_) n += run.held.size();
  return n;
}

void FtRuns::StepParts(Run& run, const std::string& group, TimePoint now, FtOutput& out) {
  std::optional<Result<SyncCall>> joined = run.held.Assemble(group);
  if (!joined) return;  // some part is not held yet
  if (!joined->ok()) {
    for (uint64_t id : run.held.Take(group)) out.ended_calls.emplace_back(id, joined->status());
    return;
  }
  run.sync.Call(**joined, now);
}

Status FtRuns::Watch(const std::string& run_id, const QuorumParams& params, const std::string& group, uint64_t watch_id,
                     TimePoint now, FtOutput& out, const std::string& node) {
  CTRUN_RETURN_IF_ERROR(CheckGroup(group));
  CTRUN_RETURN_IF_ERROR(CheckNode(group, node));
  Result<Run*> found = RunFor(run_id, params, now);
  if (!found.ok()) return found.status();
  Run& run = **found;
  CTRUN_RETURN_IF_ERROR(Admit(run, run_id, group));
  auto watching = run.watches.find(group);
  const size_t most = static_cast<size_t>(run.held.parts_of(group).value_or(kMaxFtParts));
  if (watching != run.watches.end() && !watching->second.count(node) && watching->second.size() >= most) {
    return Status::ResourceExhausted("replica group '" + group + "' refused the watch of node " + Quoted(node) +
                                     ": it already has " + std::to_string(most) + (most == 1 ? " watch" : " watches") +
                                     " open (one per node of the group); end one first");
  }
  run.active.insert(group);
  run.known.insert(group);
  std::map<std::string, uint64_t>& nodes = run.watches[group];
  if (auto it = nodes.find(node); it != nodes.end()) {
    const std::string who = node.empty() ? "group '" + group + "'" : "node '" + node + "' of group '" + group + "'";
    out.ended_watches.emplace_back(it->second, Status::Aborted("this FtWatch of " + who +
                                                               " was replaced by a newer one from the same " +
                                                               (node.empty() ? "group" : "node")));
  }
  nodes[node] = watch_id;
  Rewatch(run, group, now);
  Settle(run_id, run, now, out);
  return Status::Ok();
}

Status FtRuns::Leave(const std::string& run_id, const std::string& group, const std::string& reason, TimePoint now,
                     FtOutput& out, std::optional<int64_t> finished_step) {
  CTRUN_RETURN_IF_ERROR(CheckRun(run_id));
  CTRUN_RETURN_IF_ERROR(CheckGroup(group));
  CTRUN_RETURN_IF_ERROR(CheckBytes("replica group '" + group + "': leave reason", reason, 0, kMaxFtReasonBytes,
                                   "give a reason of at most 256 bytes"));
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return Status::Ok();
  Run& run = it->second;
  if (run.watches.count(group)) run.left.insert(group);  // its watches stop heartbeating for it
  Rewatch(run, group, now);
  if (finished_step) {
    if (*finished_step < 0) return Status::InvalidArgument("replica group '" + group + "': a negative finished step");
    run.finished_step = std::max(run.finished_step.value_or(0), *finished_step);
    out.logs.push_back("fault-tolerance run '" + OneLine(run_id) + "': replica group '" + group +
                       "' finished training at step " + std::to_string(*finished_step));
  }
  Lose(run_id, run, group, reason.empty() ? "it left" : OneLine(reason), now, out, finished_step.has_value());
  return Status::Ok();
}

void FtRuns::DropCall(const std::string& run_id, const std::string& group, uint64_t call_id) {
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return;
  it->second.held.Drop(group, call_id);
}

void FtRuns::WatchGone(const std::string& run_id, const std::string& group, uint64_t watch_id, TimePoint now,
                       FtOutput& out) {
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return;
  Run& run = it->second;
  auto watching = run.watches.find(group);
  if (watching == run.watches.end()) return;
  std::map<std::string, uint64_t>& nodes = watching->second;
  auto watch = nodes.begin();
  while (watch != nodes.end() && watch->second != watch_id) ++watch;
  if (watch == nodes.end()) return;
  nodes.erase(watch);
  if (nodes.empty()) {
    run.watches.erase(watching);
    run.left.erase(group);
  } else {
    run.left.insert(group);  // its other nodes' watches stop heartbeating for the lost group
  }
  Rewatch(run, group, now);
  Lose(run_id, run, group, "its agent's watch stream ended", now, out);
}

void FtRuns::Rewatch(Run& run, const std::string& group, TimePoint now) {
  const bool watched = run.watches.count(group) > 0 && !run.left.count(group);
  if (watched == (run.pinned.count(group) > 0)) return;
  if (watched) {
    run.pinned.insert(group);
  } else {
    run.pinned.erase(group);
  }
  run.sync.Watched(group, watched, now);
}

void FtRuns::ForgetIfGone(Run& run, const std::string& group) {
  if (!run.active.count(group) && !run.watches.count(group) && !run.held.holds(group)) run.held.Forget(group);
}

void FtRuns::Lose(const std::string& run_id, Run& run, const std::string& group, const std::string& reason,
                  TimePoint now, FtOutput& out, bool finished) {
  const bool was_active = run.active.erase(group) > 0;
  const std::optional<Quorum>& last = run.sync.last();
  if (was_active && !finished && last && last->rank_of(group)) {
    const std::pair<int64_t, uint64_t> step_in_flight{last->id, run.batches};
    std::string told_what = "the others were told of an earlier loss in this step";
    if (run.told != step_in_flight) {
      run.told = step_in_flight;
      size_t told = 0;
      for (const auto& [other, nodes] : run.watches) {
        if (other == group) continue;
        for (const auto& [node, watch_id] : nodes) {
          out.pushes.emplace_back(watch_id, FtLostEvent{group, last->id, reason});
        }
        ++told;
      }
      told_what = "told " + Count(told, "other group") + " watching";
    }
    out.logs.push_back("fault-tolerance run '" + OneLine(run_id) + "': replica group '" + group +
                       "', a member of quorum " + std::to_string(last->id) + ", was lost (" + reason + "); " +
                       told_what);
  }
  for (uint64_t held : run.held.Take(group)) {
    out.ended_calls.emplace_back(held, Status::Aborted("replica group '" + group + "' left the quorum (" + reason +
                                                       "); call FtSync again to take part"));
  }
  if (!run.watches.count(group)) run.known.erase(group);
  ForgetIfGone(run, group);
  run.sync.Lost(group, now);
  run.pinned.erase(group);  // Lost ends the pin; a watch not left pins it again
  Rewatch(run, group, now);
  Settle(run_id, run, now, out);
}

void FtRuns::Settle(const std::string& run_id, Run& run, TimePoint now, FtOutput& out) {
  // The watching groups that have not left heartbeat here: they are pinned
  // (Rewatch), which is the same at O(1) per call.
  std::vector<SyncAnswer> answers = run.sync.Tick(now);
  if (!answers.empty()) ++run.batches;
  for (SyncAnswer& answer : answers) {
    // Every part still held gets the group's answer (a dropped one: none).
    for (uint64_t held : run.held.Take(answer.group)) out.answers.emplace_back(held, answer);
  }
  for (std::string& note : run.sync.TakeNotes()) {
    out.logs.push_back("fault-tolerance run '" + OneLine(run_id) + "': " + note);
  }
  if (const std::optional<Quorum>& last = run.sync.last(); last && last->id != run.logged_quorum) {
    run.logged_quorum = last->id;
    out.logs.push_back("fault-tolerance run '" + OneLine(run_id) + "': quorum " + std::to_string(last->id) +
                       " formed with " + Count(last->members.size(), "replica group") + " (" + Names(last->members) +
                       ") at step " + std::to_string(last->max_step()) + ": " + run.sync.reason());
  }
  run.next_tick = run.sync.NextDeadline(now);
  if (!run.watches.empty() || !run.held.empty()) {
    run.idle_since.reset();
  } else if (!run.idle_since) {
    run.idle_since = now;
  }
}

void FtRuns::TickDue(TimePoint now, FtOutput& out) {
  for (auto it = runs_.begin(); it != runs_.end();) {
    Run& run = it->second;
    if (run.idle_since && *run.idle_since + limits_.idle_ttl <= now) {
      it = runs_.erase(it);  // no watch and no held call: nobody to tell
      continue;
    }
    if (run.next_tick && *run.next_tick <= now) Settle(it->first, run, now, out);
    ++it;
  }
}

std::optional<TimePoint> FtRuns::NextDeadline() const {
  std::optional<TimePoint> next;
  auto take = [&](std::optional<TimePoint> t) {
    if (t && (!next || *t < *next)) next = t;
  };
  for (const auto& [id, run] : runs_) {
    take(run.next_tick);
    if (run.idle_since) take(*run.idle_since + limits_.idle_ttl);
  }
  return next;
}

void FtRuns::EndAll(FtOutput& out) {
  const Status stopping = Status::Unavailable("the rendezvous server is shutting down: retry against the new one");
  for (auto& [id, run] : runs_) {
    run.held.ForEachCall([&](uint64_t call_id) { out.ended_calls.emplace_back(call_id, stopping); });
    for (const auto& [group, nodes] : run.watches) {
      for (const auto& [node, watch_id] : nodes) out.ended_watches.emplace_back(watch_id, stopping);
    }
  }
  runs_.clear();
}

std::optional<Quorum> FtRuns::LastQuorum(const std::string& run_id) const {
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return std::nullopt;
  return it->second.sync.last();
}

std::optional<FtRunView> FtRuns::View(const std::string& run_id) const {
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return std::nullopt;
  const Run& run = it->second;
  // Waiting: the groups whose joined call is not answered yet, and those
  // with some parts held but not all (not joined yet).
  std::set<std::string> waiting;
  for (std::string& g : run.sync.Pending()) waiting.insert(std::move(g));
  for (std::string& g : run.held.Partial()) waiting.insert(std::move(g));
  return FtRunView{.min_replicas = run.params.min_replicas,
                   .max_replicas = run.params.max_replicas,
                   .quorum = run.sync.last(),
                   .groups = {run.active.begin(), run.active.end()},
                   .waiting = {waiting.begin(), waiting.end()},
                   .reason = run.sync.reason()};
}

}  // namespace ctrun::rdzv
