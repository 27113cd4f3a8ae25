#include "launcher/ft/worker_lines.h"

#include <fmt/format.h>

#include <charconv>

#include "launcher/cli/text.h"

namespace ctrun::launcher {
namespace {

Status Bad(std::string_view field, std::string_view value, std::string_view fix) {
  return Status::InvalidArgument(
      fmt::format("worker line: bad {} '{}' ({})", field, QuotePart(value), fix));
}

template <typename T>
bool ParseWhole(std::string_view s, T& out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// Moves a parsed field into place, or returns its error.
template <typename T>
Status Take(Result<T> r, T& out) {
  if (!r.ok()) return r.status();
  out = std::move(*r);
  return Status::Ok();
}

Result<int64_t> Step(std::string_view field, std::string_view s) {
  int64_t v = 0;
  if (!ParseWhole(s, v) || v < 0) return Bad(field, s, "a step is a whole number >= 0");
  return v;
}

Result<int> LocalRank(std::string_view s) {
  int v = 0;
  if (!ParseWhole(s, v) || v < 0 || v > 1'000'000) return Bad("local rank", s, "a whole number >= 0");
  return v;
}

Result<uint16_t> Port(std::string_view field, std::string_view s) {
  uint16_t v = 0;
  if (!ParseWhole(s, v) || v == 0) return Bad(field, s, "a port from 1 to 65535");
  return v;
}

// `-` or `<quorum_id>/<step>/<0|1|2>`.
Result<std::optional<FtWorkerBallot>> Ballot(std::string_view s) {
  if (s == "-") return std::optional<FtWorkerBallot>();
  const std::vector<std::string_view> parts = Split(s, '/');
  FtWorkerBallot b;
  if (parts.size() != 3 || !ParseWhole(parts[0], b.quorum_id) || b.quorum_id <= 0 ||
      !ParseWhole(parts[1], b.step) || b.step < 0 || (parts[2] != "0" && parts[2] != "1" && parts[2] != "2")) {
    return Bad("ballot", s, "- or QUORUM_ID/STEP/OK with OK 0, 1 or 2");
  }
  b.ok = parts[2] == "1";
  b.late = parts[2] == "2";
  return std::optional<FtWorkerBallot>(b);
}

Result<FtWorkerLine> ParseSync(const std::vector<std::string_view>& w) {
  if (w.size() != 6) return Status::InvalidArgument("worker line: 'sync' takes 5 fields: LOCAL_RANK COMMITTED_STEP RING_PORT HEAL_PORT BALLOT");
  FtSyncLine line;
  CTRUN_RETURN_IF_ERROR(Take(LocalRank(w[1]), line.local_rank));
  CTRUN_RETURN_IF_ERROR(Take(Step("committed step", w[2]), line.committed_step));
  CTRUN_RETURN_IF_ERROR(Take(Port("ring port", w[3]), line.ring_port));
  CTRUN_RETURN_IF_ERROR(Take(Port("heal port", w[4]), line.heal_port));
  CTRUN_RETURN_IF_ERROR(Take(Ballot(w[5]), line.ballot));
  return FtWorkerLine(line);
}

Result<FtWorkerLine> ParseHealed(const std::vector<std::string_view>& w) {
  if (w.size() != 6) return Status::InvalidArgument("worker line: 'healed' takes 5 fields: LOCAL_RANK STEP SOURCE BYTES SECONDS");
  FtHealedLine line;
  CTRUN_RETURN_IF_ERROR(Take(LocalRank(w[1]), line.local_rank));
  CTRUN_RETURN_IF_ERROR(Take(Step("step", w[2]), line.step));
  if (w[3].empty() || w[3].size() > 256) return Bad("source", w[3], "HOST:PORT");
  line.source = std::string(w[3]);
  if (!ParseWhole(w[4], line.bytes)) return Bad("byte count", w[4], "a whole number");
  const std::optional<double> seconds = ParseDouble(w[5]);
  if (!seconds || !(*seconds >= 0) || *seconds > 1e9) return Bad("seconds", w[5], "a number >= 0");
  line.seconds = *seconds;
  return FtWorkerLine(line);
}

std::string OneLine(std::string_view word, std::string_view text) {
  std::string out(word);
  out += ' ';
  for (char c : text) {
    if (out.size() + 2 > kFtMaxLine) break;
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c;
  }
  out += '\n';
  return out;
}

}  // namespace

Result<FtWorkerLine> ParseFtWorkerLine(std::string_view line) {
  if (line.size() >= kFtMaxLine) return Status::InvalidArgument("worker line: longer than 4096 bytes");
  std::vector<std::string_view> words = Split(line, ' ');
  if (words[0] == "sync") return ParseSync(words);
  if (words[0] == "healed") return ParseHealed(words);
  if (words[0] == "done") {
    if (words.size() != 3) return Status::InvalidArgument("worker line: 'done' takes 2 fields: LOCAL_RANK STEP");
    FtDoneLine done;
    CTRUN_RETURN_IF_ERROR(Take(LocalRank(words[1]), done.local_rank));
    CTRUN_RETURN_IF_ERROR(Take(Step("step", words[2]), done.step));
    return FtWorkerLine(done);
  }
  return Status::InvalidArgument(
      fmt::format("worker line: unknown word '{}' (a worker sends 'sync', 'healed' or 'done')", QuotePart(words[0])));
}

std::string FormatFtQuorum(const FtRankAnswer& a) {
  std::string heal = "-";
  if (!a.heal.empty()) {
    heal.clear();
    for (const std::string& s : a.heal) heal += (heal.empty() ? "" : ",") + s;
  }
  return fmt::format("quorum {} {} {} {} {} {} {} {}\n", a.commit ? (*a.commit ? "1" : "0") : "-", a.quorum_id,
                     a.replica_rank, a.replica_world, a.max_step, a.right.empty() ? "-" : a.right, heal,
                     a.serve ? 1 : 0);
}

std::string FormatFtAbort(std::string_view reason) { return OneLine("abort", reason); }
std::string FormatFtFinished(int64_t step) { return fmt::format("finished {}\n", step); }
std::string FormatFtError(std::string_view message) { return OneLine("error", message); }

}  // namespace ctrun::launcher
