#include "launcher/agent/restart_policy.h"

#include <string>

#include "rendezvous/machine/failure_verdict.h"
#include "rendezvous/machine/verdict_line.h"

namespace ctrun::launcher {

namespace {

using rdzv::FailureClass;

// A class whose repeat is a property of the program, not of a peer or the
// network: a Python exception of any kind, or a crash with its last line.
bool Repeatable(FailureClass cls) {
  switch (cls) {
    case FailureClass::kPythonException:
    case FailureClass::kCudaOom:
    case FailureClass::kDiskFull:
    case FailureClass::kFileNotFound:
    case FailureClass::kImportError:
    case FailureClass::kNanOrInf:
      return true;
    default:
      return false;
  }
}

// The same failure again, at the same step where both steps are known.
bool SameFailure(const FailureSignature& a, const FailureSignature& b) {
  if (a.rank != b.rank || a.cls != b.cls || a.error != b.error || a.last_line != b.last_line) return false;
  return !(a.steps && b.steps) || *a.steps == *b.steps;
}

}  // namespace

void NoteAttemptFailures(const std::vector<rdzv::WorkerFailureInfo>& failures,
                         const std::vector<std::optional<uint64_t>>& steps, int ranks, AttemptEnd& end) {
  std::vector<rdzv::FailureEvidence> evidence;
  std::vector<rdzv::ReportedFailure> reported;
  for (const rdzv::WorkerFailureInfo& f : failures) {
    evidence.push_back(rdzv::EvidenceOf(f));
    reported.push_back(rdzv::ReportedFailure{{}, "", 0, f, 0});
  }
  end.bad_launch = rdzv::IsBadLaunch(evidence, ranks);
  const rdzv::FailureVerdict verdict = rdzv::DecideVerdict(reported);
  if (!verdict.root) return;
  const size_t i = *verdict.root;
  const rdzv::WorkerFailureInfo& root = failures[i];
  end.failure = FailureSignature{root.rank, rdzv::ClassifyFailure(evidence[i]).cls, root.error_message,
                                 root.last_line, i < steps.size() ? steps[i] : std::nullopt};
}

RestartPolicy::Decision RestartPolicy::OnAttemptEnd(const AttemptEnd& attempt) {
  const bool first = attempts_ended_ == 0;
  ++attempts_ended_;
  Decision d;
  if (attempt.membership_changed) {
    last_failure_.reset();
    return d;
  }
  std::optional<FailureSignature> previous = std::move(last_failure_);
  last_failure_ = attempt.failure;
  if (!config_.restart_unfixable) {
    if (attempt.bad_launch) {
      d.unfixable = "every rank failed within " + std::to_string(static_cast<int>(rdzv::kBadLaunchWindowS)) +
                    " s of its start with the same error: the launch cannot work";
    } else if (attempt.failure && previous && Repeatable(attempt.failure->cls) && SameFailure(*previous, *attempt.failure)) {
      const FailureSignature& f = *attempt.failure;
      d.unfixable = "rank " + std::to_string(f.rank) + " failed twice in a row with the same error" +
                    (f.steps ? " at the same step (" + std::to_string(*f.steps) + " steps in)" : std::string()) +
                    ": " + (f.error.empty() ? f.last_line : f.error);
    }
  }
  const bool healthy = attempt.uptime >= config_.min_healthy_uptime;
  const bool progress = config_.heartbeat_on ? attempt.heartbeat_touched : healthy;
  if (config_.fail_fast_on_startup && first && !progress) {
    d.stop_at_startup = true;
    return d;
  }
  if (healthy) doublings_ = 0;
  d.delay = config_.backoff * (1 << doublings_);
  if ((1 << doublings_) < kBackoffCap) ++doublings_;
  return d;
}

}  // namespace ctrun::launcher
