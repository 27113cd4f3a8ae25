#include "rendezvous/machine/failure_record.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>

#include "base/utf8.h"

namespace ctrun::rdzv {

namespace {

Status FailureTextTooLong(size_t index, std::string_view field, size_t size, size_t bound, std::string_view fix) {
  return Status::InvalidArgument("failure report: failures[" + std::to_string(index) + "]." + std::string(field) +
                                 " is " + std::to_string(size) + " bytes, more than " + std::to_string(bound) +
                                 ": " + std::string(fix));
}

// The Kept order: failure time, then rank, then arrival.
template <typename E>
bool EarlierFailure(const E& a, const E& b) {
  const WorkerFailureInfo& x = a.failure.failure;
  const WorkerFailureInfo& y = b.failure.failure;
  if (x.failed_at_unix_s != y.failed_at_unix_s) return x.failed_at_unix_s < y.failed_at_unix_s;
  if (x.rank != y.rank) return x.rank < y.rank;
  return a.seq < b.seq;
}

}  // namespace

Status CheckFailureReport(std::string_view host, const std::vector<WorkerFailureInfo>& failures) {
  if (host.size() > kMaxFailureHost) {
    return Status::InvalidArgument("failure report: host is " + std::to_string(host.size()) + " bytes, more than " +
                                   std::to_string(kMaxFailureHost) + ": send the node's host name");
  }
  if (failures.size() > kMaxFailuresPerReport) {
    return Status::InvalidArgument("failure report: failures holds " + std::to_string(failures.size()) +
                                   " workers, more than " + std::to_string(kMaxFailuresPerReport) +
                                   ": send the rest in another report");
  }
  for (size_t i = 0; i < failures.size(); ++i) {
    const WorkerFailureInfo& f = failures[i];
    if (f.error_message.size() > kMaxFailureText) {
      return FailureTextTooLong(i, "error_message", f.error_message.size(), kMaxFailureText,
                                "send its first line, cut");
    }
    if (f.last_line.size() > kMaxFailureText) {
      return FailureTextTooLong(i, "last_line", f.last_line.size(), kMaxFailureText,
                                "send the traceback's last line, cut");
    }
    if (f.stacks_file.size() > kMaxFailurePath) {
      return FailureTextTooLong(i, "stacks_file", f.stacks_file.size(), kMaxFailurePath, "send a shorter path");
    }
    if (f.error_file.size() > kMaxFailurePath) {
      return FailureTextTooLong(i, "error_file", f.error_file.size(), kMaxFailurePath, "send a shorter path");
    }
    if (f.rank < 0 || f.local_rank < 0) {
      return Status::InvalidArgument("failure report: failures[" + std::to_string(i) + "] has rank " +
                                     std::to_string(f.rank) + ", local rank " + std::to_string(f.local_rank) +
                                     ": ranks are not negative");
    }
    if (f.signal < 0 || f.signal >= 128) {
      return Status::InvalidArgument("failure report: failures[" + std::to_string(i) + "].signal " +
                                     std::to_string(f.signal) + " is not a signal number in [0, 128)");
    }
    if (f.hang_frame.size() > kMaxFailureText) {
      return FailureTextTooLong(i, "hang_frame", f.hang_frame.size(), kMaxFailureText, "send the frame, cut");
    }
    if (f.oom_kills_before < -1 || f.oom_kills_after < -1) {
      return Status::InvalidArgument("failure report: failures[" + std::to_string(i) +
                                     "] has an oom_kill count below -1: send the count, or -1 when unreadable");
    }
    if (!std::isfinite(f.runtime_s) || f.max_rss_kib < 0) {
      return Status::InvalidArgument("failure report: failures[" + std::to_string(i) +
                                     "] has a runtime that is not a number or a negative RSS: send seconds "
                                     "(-1 unknown) and KiB (0 unknown)");
    }
    if (f.node_lost || f.unhealthy) {
      return Status::InvalidArgument("failure report: failures[" + std::to_string(i) +
                                     "] says node_lost or unhealthy: only the server records a node's loss; "
                                     "report the workers' exits");
    }
    if (!std::isfinite(f.failed_at_unix_s) || f.failed_at_unix_s < 0) {
      char value[48];
      std::snprintf(value, sizeof value, "%g", f.failed_at_unix_s);
      return Status::InvalidArgument("failure report: failures[" + std::to_string(i) + "].failed_at_unix_s " +
                                     value + " is not a time: send seconds since the epoch");
    }
  }
  return Status::Ok();
}

void FailureRecord::Add(const NodeId& node, const std::string& host, uint64_t round,
                        const std::vector<WorkerFailureInfo>& failures, TimePoint now) {
  for (const WorkerFailureInfo& f : failures) {
    entries_.push_back(Entry{ReportedFailure{node, host, round, f, 0}, now, next_seq_++});
    ++seen_;
  }
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return EarlierFailure(a, b); });
  if (entries_.size() <= kKeptEarliestFailures + kKeptNewestFailures) return;
  // The earliest stay; of the rest, the newest by arrival.
  std::vector<uint64_t> later;
  for (size_t i = kKeptEarliestFailures; i < entries_.size(); ++i) later.push_back(entries_[i].seq);
  std::sort(later.begin(), later.end(), std::greater<>());
  const std::set<uint64_t> newest(later.begin(), later.begin() + kKeptNewestFailures);
  std::vector<Entry> kept(entries_.begin(), entries_.begin() + kKeptEarliestFailures);
  for (size_t i = kKeptEarliestFailures; i < entries_.size(); ++i) {
    if (newest.count(entries_[i].seq)) kept.push_back(std::move(entries_[i]));
  }
  entries_ = std::move(kept);
}

void FailureRecord::AddNode(const NodeId& node, uint64_t round, bool lost, const std::string& why,
                            double failed_at_unix_s, TimePoint now) {
  WorkerFailureInfo f;
  f.rank = -1;
  f.local_rank = -1;
  f.node_lost = lost;
  f.unhealthy = !lost;
  f.error_message = CutUtf8(why, kMaxFailureText);
  f.failed_at_unix_s = failed_at_unix_s;
  Add(node, node.addr, round, {f}, now);
}

std::vector<ReportedFailure> FailureRecord::Kept(TimePoint now) const {
  std::vector<ReportedFailure> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) {
    out.push_back(e.failure);
    out.back().received_age_s = std::max(0.0, std::chrono::duration<double>(now - e.received).count());
  }
  return out;
}

}  // namespace ctrun::rdzv
