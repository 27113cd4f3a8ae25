#include "rendezvous/machine/step_sync.h"

#include <algorithm>

namespace ctrun::rdzv {

void StepSync::Call(const SyncCall& call, TimePoint now) {
  if (!last() && !resume_until_ && (call.committed_step > 0 || call.ballot)) resume_until_ = now + kResumeGrace;
  if (!last() && resume_until_ && call.ballot && call.ballot->world > 0) NoteResumeBallot(call, now);
  Held held{.call = call, .decision = std::nullopt, .asked = false};
  // Counts: a ballot of a member of the open vote for its quorum and step
  // (not one excused from it, not one for a quorum that is gone).
  const bool counts = call.ballot && vote_ &&
                      vote_->Vote(call.group, call.ballot->quorum_id, call.ballot->step, call.ballot->ok);
  if (!counts) held.call.ballot.reset();
  held_[call.group] = std::move(held);
  (counts ? undecided_ : unasked_).insert(call.group);
  (counts ? unasked_ : undecided_).erase(call.group);
  quorum_.Heartbeat(call.group, now);
  if (counts && !first_ballot_) first_ballot_ = now;
  AskDecided(now);
  if (counts && !call.ballot->ok && call.ballot->late) {
    BenchGroup(call.group, now, "it came to the step's all-reduce after the others gave up waiting");
  }
}

// While resuming: the grace ends once every group of the last quorum (the
// highest quorum id among the ballots) called with its ballot.
void StepSync::NoteResumeBallot(const SyncCall& call, TimePoint now) {
  if (call.ballot->quorum_id < resume_quorum_) return;
  if (call.ballot->quorum_id > resume_quorum_) {
    resume_quorum_ = call.ballot->quorum_id;
    resume_members_.clear();
  }
  resume_members_.insert(call.group);
  if (resume_members_.size() >= static_cast<size_t>(call.ballot->world) && *resume_until_ > now) resume_until_ = now;
}

void StepSync::Heartbeat(const std::string& group, TimePoint now) {
  if (!last() && !resumed_) heard_.insert(group);
  quorum_.Heartbeat(group, now);
}

void StepSync::Watched(const std::string& group, bool watched, TimePoint now) {
  if (watched && !last() && !resumed_) heard_.insert(group);
  quorum_.Pin(group, watched, now);
}

void StepSync::Lost(const std::string& group, TimePoint now) {
  heard_.erase(group);
  held_.erase(group);
  unasked_.erase(group);
  undecided_.erase(group);
  lateness_.erase(group);
  if (vote_) vote_->Lost(group);
  quorum_.Lost(group, now);
  AskDecided(now);
}

void StepSync::AskDecided(TimePoint now) {
  CountCommitted();
  std::set<std::string> ask;
  ask.swap(unasked_);
  if (vote_ && vote_->Decision() && !undecided_.empty()) {
    ask.merge(undecided_);  // in group order, as they were held
    undecided_.clear();
  }
  for (const std::string& group : ask) Ask(group, held_.at(group), now);
}

void StepSync::Ask(const std::string& group, Held& held, TimePoint now) {
  int64_t step = held.call.committed_step;
  int64_t failures = 0;
  if (held.call.ballot) {
    held.decision = *vote_->Decision();
    if (*held.decision) step = held.call.ballot->step + 1;
    failures = *held.decision ? 0 : 1;  // a discarded step: rebuild the communicator (a new quorum id)
  }
  quorum_.Request(QuorumMember{.id = group, .step = step, .address = held.call.address,
                               .commit_failures = failures},
                  now);
  held.asked = true;
}

void StepSync::CountCommitted() {
  if (counted_ || !vote_ || !vote_->Decision()) return;
  counted_ = true;
  if (!*vote_->Decision()) return;
  for (const auto& member : last()->members) {
    if (benched_now_.count(member.id)) continue;  // excused: it took no part
    auto it = lateness_.find(member.id);
    if (it != lateness_.end() && ++it->second.clean_steps >= kCleanSteps) lateness_.erase(it);
  }
}

void StepSync::BenchGroup(const std::string& group, TimePoint now, const std::string& why) {
  if (!benched_now_.insert(group).second) return;  // once per vote
  Lateness& late = lateness_[group];
  Duration bench = std::max<Duration>(kMinBench, 10 * Pace().value_or(Duration::zero()));
  for (int i = 0; i < late.benches && bench < kMaxBench; ++i) bench *= 2;
  ++late.benches;
  late.clean_steps = 0;
  bench = std::min(bench, kMaxBench);
  quorum_.Bench(group, now + bench);
  const auto ms = [](Duration d) { return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()); };
  const std::string what = vote_ ? "step " + std::to_string(vote_->step()) : std::string("the first quorum");
  notes_.push_back("replica group " + group + " held up " + what + " (" + why +
                   "): the others go on without it; it may rejoin in " + ms(bench) + " ms" +
                   (late.benches > 1 ? " (benched " + std::to_string(late.benches) + " times running)" : ""));
}

std::vector<std::string> StepSync::TakeNotes() {
  std::vector<std::string> out;
  out.swap(notes_);
  return out;
}

std::optional<Duration> StepSync::Pace() const { return pace_; }

Duration StepSync::HangTime() const {
  if (paces_.size() < kPaceSteps / 4) return Duration::max();
  return std::min(params_.join_timeout, std::max<Duration>(kMinHangTime, *pace_ / 2));
}

// The median of paces_, kept in pace_ (read on every call and tick).
void StepSync::RecordPace(Duration step) {
  paces_.push_back(step);
  if (paces_.size() > kPaceSteps) paces_.pop_front();
  std::vector<Duration> sorted(paces_.begin(), paces_.end());
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2), sorted.end());
  pace_ = sorted[sorted.size() / 2];
}

void StepSync::CheckHangs(TimePoint now) {
  if (!vote_ || !first_ballot_ || HangTime() == Duration::max() || now < *first_ballot_ + HangTime()) return;
  for (const auto& group : vote_->Pending()) {
    vote_->Excuse(group);
    BenchGroup(group, now, "it did not vote within " + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(HangTime()).count()) +
                               " ms of the first vote");
  }
  AskDecided(now);
}

std::optional<TimePoint> StepSync::NextDeadline(TimePoint now) const {
  std::optional<TimePoint> next = quorum_.NextDeadline(now);
  if (!last() && resume_until_ && *resume_until_ > now && (!next || *resume_until_ < *next)) next = resume_until_;
  if (vote_ && first_ballot_ && HangTime() != Duration::max() && vote_->pending_count() > 0) {
    const TimePoint hang = *first_ballot_ + HangTime();
    if (hang > now && (!next || hang < *next)) next = hang;
  }
  return next;
}

std::vector<SyncAnswer> StepSync::Tick(TimePoint now) {
  CheckHangs(now);
  if (!last() && resume_until_ && now < *resume_until_) return {};  // the groups of a run in progress come back
  if (!last() && resume_until_ && !resumed_) {
    resumed_ = true;
    for (const auto& group : heard_) {
      if (!held_.count(group)) BenchGroup(group, now, "it did not call again before the run resumed on the restarted server");
    }
    heard_.clear();
  }
  const std::optional<int64_t> previous_id = last() ? std::optional<int64_t>(last()->id) : std::nullopt;
  std::optional<Quorum> formed = quorum_.Tick(now);
  if (!formed) return {};
  if (previous_id == formed->id) {  // a steady step: the pace
    RecordPace(now - vote_opened_);
  }
  auto quorum = std::make_shared<const Quorum>(std::move(*formed));
  auto lookup = std::make_shared<const QuorumLookup>(quorum);
  std::vector<SyncAnswer> answers;
  answers.reserve(quorum->members.size());
  for (const auto& member : quorum->members) {
    auto it = held_.find(member.id);
    if (it == held_.end()) continue;
    answers.push_back(SyncAnswer{.group = member.id, .commit = it->second.decision, .quorum = quorum,
                                 .finished_step = std::nullopt, .lookup = lookup});
    held_.erase(it);
    unasked_.erase(member.id);  // a second call not asked yet is answered too
    undecided_.erase(member.id);
  }
  std::vector<std::string> ids;
  ids.reserve(quorum->members.size());
  for (const auto& member : quorum->members) ids.push_back(member.id);
  vote_.emplace(quorum->id, quorum->max_step(), ids);
  vote_opened_ = now;
  first_ballot_.reset();
  benched_now_.clear();
  counted_ = false;
  return answers;
}

std::vector<std::string> StepSync::Pending() const {
  std::vector<std::string> out;
  for (const auto& [group, held] : held_) out.push_back(group);
  return out;
}

}  // namespace ctrun::rdzv
