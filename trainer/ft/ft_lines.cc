#include "trainer/ft/ft_lines.h"

#include <charconv>
#include <cstdio>
#include <limits>

namespace ctrun::trainer::ft {
namespace {

// Splits at runs of spaces.
std::vector<std::string_view> FtSplitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    std::size_t end = i;
    while (end < line.size() && line[end] != ' ') ++end;
    if (end > i) fields.push_back(line.substr(i, end - i));
    i = end;
  }
  return fields;
}

std::string FtQuoted(std::string_view text) {
  constexpr std::size_t kShown = 40;
  std::string out = "'";
  out += text.substr(0, kShown);
  if (text.size() > kShown) out += "...";
  return out + "'";
}

Status FtBadField(std::string_view field, std::string_view text, std::string_view want) {
  return Status::InvalidArgument("quorum line: " + std::string(field) + " " + FtQuoted(text) + " is not " +
                                 std::string(want));
}

template <typename Int>
bool FtParseInt(std::string_view text, Int& out) {
  if (text.empty()) return false;
  const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), out);
  return err == std::errc() && end == text.data() + text.size();
}

Result<int64_t> FtNonNegative(std::string_view field, std::string_view text) {
  int64_t value = 0;
  if (!FtParseInt(text, value) || value < 0) return FtBadField(field, text, "an integer >= 0");
  return value;
}

Result<bool> FtFlag(std::string_view field, std::string_view text) {
  if (text == "1") return true;
  if (text == "0") return false;
  return FtBadField(field, text, "0 or 1");
}

Status FtParseRight(std::string_view text, QuorumLine& out) {
  if (out.replica_world == 1) {
    if (text != "-") return FtBadField("right", text, "'-' (the quorum has one group)");
    return Status::Ok();
  }
  auto right = ParseHostPort(text, "quorum line: right");
  if (!right.ok()) return right.status();
  out.right_host = std::move(right->host);
  out.right_port = right->port;
  return Status::Ok();
}

Status FtParseHeal(std::string_view text, QuorumLine& out) {
  if (text == "-") return Status::Ok();
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    const std::string_view one = text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    auto source = ParseHostPort(one, "quorum line: heal source");
    if (!source.ok()) return source.status();
    out.heal_sources.emplace_back(one);
    if (comma == std::string_view::npos) return Status::Ok();
    start = comma + 1;
  }
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

Result<HostPort> ParseHostPort(std::string_view text, std::string_view what) {
  const std::size_t colon = text.rfind(':');
  const std::string bad = std::string(what) + " " + FtQuoted(text) + " is not host:port";
  if (colon == std::string_view::npos || colon == 0) return Status::InvalidArgument(bad);
  std::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  uint32_t port = 0;
  if (host.empty() || host.find_first_of("[], ") != std::string_view::npos ||
      !FtParseInt(text.substr(colon + 1), port) || port == 0 || port > std::numeric_limits<uint16_t>::max()) {
    return Status::InvalidArgument(bad);
  }
  return HostPort{std::string(host), static_cast<uint16_t>(port)};
}

Result<QuorumLine> ParseQuorum(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (line.find_first_of("\r\n\t") != std::string_view::npos) {
    return Status::InvalidArgument("quorum line: it holds a control character");
  }
  const std::vector<std::string_view> f = FtSplitFields(line);
  static constexpr const char* kNames[] = {"verb",          "commit",   "quorum_id", "replica_rank", "replica_world",
                                           "max_step",      "right",    "heal",      "serve"};
  constexpr std::size_t kCount = sizeof(kNames) / sizeof(kNames[0]);
  if (f.empty() || f[0] != "quorum") return Status::InvalidArgument("quorum line: it does not start with 'quorum'");
  if (f.size() < kCount) return Status::InvalidArgument(std::string("quorum line: no ") + kNames[f.size()]);
  if (f.size() > kCount) {
    return Status::InvalidArgument("quorum line: extra text " + FtQuoted(f[kCount]) + " after serve");
  }
  QuorumLine out;
  if (f[1] != "-") {
    auto commit = FtFlag("commit", f[1]);
    if (!commit.ok()) return FtBadField("commit", f[1], "0, 1 or '-'");
    out.commit = *commit;
  }
  int64_t value = 0;
  if (!FtParseInt(f[2], value) || value < 1) return FtBadField("quorum_id", f[2], "an integer >= 1");
  out.quorum_id = value;
  if (!FtParseInt(f[4], out.replica_world) || out.replica_world < 1) {
    return FtBadField("replica_world", f[4], "an integer >= 1");
  }
  if (!FtParseInt(f[3], out.replica_rank) || out.replica_rank < 0 || out.replica_rank >= out.replica_world) {
    return FtBadField("replica_rank", f[3], "an integer from 0 to replica_world - 1");
  }
  auto max_step = FtNonNegative("max_step", f[5]);
  if (!max_step.ok()) return max_step.status();
  out.max_step = *max_step;
  CTRUN_RETURN_IF_ERROR(FtParseRight(f[6], out));
  CTRUN_RETURN_IF_ERROR(FtParseHeal(f[7], out));
  auto serve = FtFlag("serve", f[8]);
  if (!serve.ok()) return serve.status();
  out.serve = *serve;
  return out;
}

}  // namespace ctrun::trainer::ft
