#include "base/ft_wire/worker_lines.h"

#include <cstdio>
#include <vector>

#include "base/ft_wire/fields.h"

namespace ctrun::ft_wire {
namespace {

Status WorkerBad(std::string_view field, std::string_view value, std::string_view fix) {
  return Status::InvalidArgument("worker line: bad " + std::string(field) + " '" + QuotePart(value) + "' (" +
                                 std::string(fix) + ")");
}

// Moves a parsed field into place, or returns its error.
template <typename T>
Status Take(Result<T> r, T& out) {
  if (!r.ok()) return r.status();
  out = std::move(*r);
  return Status::Ok();
}

Result<int64_t> WorkerStep(std::string_view field, std::string_view s) {
  int64_t v = 0;
  if (!ParseWhole(s, v) || v < 0) return WorkerBad(field, s, "a step is a whole number >= 0");
  return v;
}

Result<int> WorkerLocalRank(std::string_view s) {
  int v = 0;
  if (!ParseWhole(s, v) || v < 0 || v > 1'000'000) return WorkerBad("local rank", s, "a whole number >= 0");
  return v;
}

Result<uint16_t> WorkerPort(std::string_view field, std::string_view s) {
  uint16_t v = 0;
  if (!ParseWhole(s, v) || v == 0) return WorkerBad(field, s, "a port from 1 to 65535");
  return v;
}

// `-` or `<quorum_id>/<step>/<0|1|2>`.
Result<std::optional<Ballot>> WorkerBallot(std::string_view s) {
  if (s == "-") return std::optional<Ballot>();
  const std::vector<std::string_view> parts = SplitAt(s, '/');
  Ballot b;
  if (parts.size() != 3 || !ParseWhole(parts[0], b.quorum_id) || b.quorum_id <= 0 ||
      !ParseWhole(parts[1], b.step) || b.step < 0 || (parts[2] != "0" && parts[2] != "1" && parts[2] != "2")) {
    return WorkerBad("ballot", s, "- or QUORUM_ID/STEP/OK with OK 0, 1 or 2");
  }
  b.ok = parts[2] == "1";
  b.late = parts[2] == "2";
  return std::optional<Ballot>(b);
}

Result<WorkerLine> ParseSync(const std::vector<std::string_view>& w) {
  if (w.size() != 6) {
    return Status::InvalidArgument(
        "worker line: 'sync' takes 5 fields: LOCAL_RANK COMMITTED_STEP RING_PORT HEAL_PORT BALLOT");
  }
  SyncLine line;
  CTRUN_RETURN_IF_ERROR(Take(WorkerLocalRank(w[1]), line.local_rank));
  CTRUN_RETURN_IF_ERROR(Take(WorkerStep("committed step", w[2]), line.committed_step));
  CTRUN_RETURN_IF_ERROR(Take(WorkerPort("ring port", w[3]), line.ring_port));
  CTRUN_RETURN_IF_ERROR(Take(WorkerPort("heal port", w[4]), line.heal_port));
  CTRUN_RETURN_IF_ERROR(Take(WorkerBallot(w[5]), line.ballot));
  return WorkerLine(line);
}

Result<WorkerLine> ParseHealed(const std::vector<std::string_view>& w) {
  if (w.size() != 6) {
    return Status::InvalidArgument("worker line: 'healed' takes 5 fields: LOCAL_RANK STEP SOURCE BYTES SECONDS");
  }
  HealedLine line;
  CTRUN_RETURN_IF_ERROR(Take(WorkerLocalRank(w[1]), line.local_rank));
  CTRUN_RETURN_IF_ERROR(Take(WorkerStep("step", w[2]), line.step));
  if (w[3].empty() || w[3].size() > 256) return WorkerBad("source", w[3], "HOST:PORT");
  line.source = std::string(w[3]);
  if (!ParseWhole(w[4], line.bytes)) return WorkerBad("byte count", w[4], "a whole number");
  const std::optional<double> seconds = ParseDecimal(w[5]);
  if (!seconds || !(*seconds >= 0) || *seconds > 1e9) return WorkerBad("seconds", w[5], "a number >= 0");
  line.seconds = *seconds;
  return WorkerLine(line);
}

Result<WorkerLine> ParseDone(const std::vector<std::string_view>& w) {
  if (w.size() != 3) return Status::InvalidArgument("worker line: 'done' takes 2 fields: LOCAL_RANK STEP");
  DoneLine done;
  CTRUN_RETURN_IF_ERROR(Take(WorkerLocalRank(w[1]), done.local_rank));
  CTRUN_RETURN_IF_ERROR(Take(WorkerStep("step", w[2]), done.step));
  return WorkerLine(done);
}

}  // namespace

std::string FormatSync(const SyncLine& line) {
  std::string out = "sync " + std::to_string(line.local_rank) + " " + std::to_string(line.committed_step) + " " +
                    std::to_string(line.ring_port) + " " + std::to_string(line.heal_port) + " ";
  if (line.ballot) {
    out += std::to_string(line.ballot->quorum_id) + "/" + std::to_string(line.ballot->step) + "/" +
           (line.ballot->ok ? "1" : line.ballot->late ? "2" : "0");
  } else {
    out += "-";
  }
  return out + "\n";
}

std::string FormatHealed(const HealedLine& line) {
  char seconds[64];
  std::snprintf(seconds, sizeof(seconds), "%.3f", line.seconds);
  return "healed " + std::to_string(line.local_rank) + " " + std::to_string(line.step) + " " + line.source + " " +
         std::to_string(line.bytes) + " " + seconds + "\n";
}

std::string FormatDone(const DoneLine& line) {
  return "done " + std::to_string(line.local_rank) + " " + std::to_string(line.step) + "\n";
}

Result<WorkerLine> ParseWorkerLine(std::string_view line) {
  if (line.size() >= kMaxLineBytes) return Status::InvalidArgument("worker line: longer than 4096 bytes");
  const std::vector<std::string_view> words = SplitAt(line, ' ');
  if (words[0] == "sync") return ParseSync(words);
  if (words[0] == "healed") return ParseHealed(words);
  if (words[0] == "done") return ParseDone(words);
  return Status::InvalidArgument("worker line: unknown word '" + QuotePart(words[0]) +
                                 "' (a worker sends 'sync', 'healed' or 'done')");
}

}  // namespace ctrun::ft_wire
