#include "base/ft_wire/agent_lines.h"

#include <cstdlib>

#include "base/ft_wire/fields.h"
#include "base/ft_wire/host_port.h"

namespace ctrun::ft_wire {
namespace {

Status QuorumBad(std::string_view field, std::string_view text, std::string_view want) {
  return Status::InvalidArgument("quorum line: " + std::string(field) + " " + Excerpt(text) + " is not " +
                                 std::string(want));
}

Result<int64_t> QuorumNonNegative(std::string_view field, std::string_view text) {
  int64_t value = 0;
  if (!ParseWhole(text, value) || value < 0) return QuorumBad(field, text, "an integer >= 0");
  return value;
}

Result<bool> QuorumFlag(std::string_view field, std::string_view text) {
  if (text == "1") return true;
  if (text == "0") return false;
  return QuorumBad(field, text, "0 or 1");
}

Status QuorumRight(std::string_view text, QuorumLine& out) {
  if (out.replica_world == 1) {
    if (text != "-") return QuorumBad("right", text, "'-' (the quorum has one group)");
    return Status::Ok();
  }
  auto right = ParseHostPort(text, "quorum line: right");
  if (!right.ok()) return right.status();
  out.right_host = std::move(right->host);
  out.right_port = right->port;
  return Status::Ok();
}

Status QuorumHeal(std::string_view text, QuorumLine& out) {
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

// `word text\n`, control characters in the text made spaces, cut to fit.
std::string OneLine(std::string_view word, std::string_view text) {
  std::string out(word);
  out += ' ';
  for (char c : text) {
    if (out.size() + 2 > kMaxLineBytes) break;
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c;
  }
  out += '\n';
  return out;
}

}  // namespace

std::string FormatQuorum(const QuorumLine& a) {
  std::string heal = "-";
  if (!a.heal_sources.empty()) {
    heal.clear();
    for (const std::string& s : a.heal_sources) heal += (heal.empty() ? "" : ",") + s;
  }
  return "quorum " + std::string(a.commit ? (*a.commit ? "1" : "0") : "-") + " " + std::to_string(a.quorum_id) +
         " " + std::to_string(a.replica_rank) + " " + std::to_string(a.replica_world) + " " +
         std::to_string(a.max_step) + " " +
         (a.right_host.empty() ? std::string("-") : FormatHostPort(a.right_host, a.right_port)) + " " + heal + " " +
         (a.serve ? "1" : "0") + "\n";
}

Result<QuorumLine> ParseQuorum(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (line.find_first_of("\r\n\t") != std::string_view::npos) {
    return Status::InvalidArgument("quorum line: it holds a control character");
  }
  const std::vector<std::string_view> f = SplitWords(line);
  static constexpr const char* kNames[] = {"verb",     "commit", "quorum_id", "replica_rank", "replica_world",
                                           "max_step", "right",  "heal",      "serve"};
  constexpr std::size_t kCount = sizeof(kNames) / sizeof(kNames[0]);
  if (f.empty() || f[0] != "quorum") return Status::InvalidArgument("quorum line: it does not start with 'quorum'");
  if (f.size() < kCount) return Status::InvalidArgument(std::string("quorum line: no ") + kNames[f.size()]);
  if (f.size() > kCount) {
    return Status::InvalidArgument("quorum line: extra text " + Excerpt(f[kCount]) + " after serve");
  }
  QuorumLine out;
  if (f[1] != "-") {
    auto commit = QuorumFlag("commit", f[1]);
    if (!commit.ok()) return QuorumBad("commit", f[1], "0, 1 or '-'");
    out.commit = *commit;
  }
  int64_t value = 0;
  if (!ParseWhole(f[2], value) || value < 1) return QuorumBad("quorum_id", f[2], "an integer >= 1");
  out.quorum_id = value;
  if (!ParseWhole(f[4], out.replica_world) || out.replica_world < 1) {
    return QuorumBad("replica_world", f[4], "an integer >= 1");
  }
  if (!ParseWhole(f[3], out.replica_rank) || out.replica_rank < 0 || out.replica_rank >= out.replica_world) {
    return QuorumBad("replica_rank", f[3], "an integer from 0 to replica_world - 1");
  }
  auto max_step = QuorumNonNegative("max_step", f[5]);
  if (!max_step.ok()) return max_step.status();
  out.max_step = *max_step;
  CTRUN_RETURN_IF_ERROR(QuorumRight(f[6], out));
  CTRUN_RETURN_IF_ERROR(QuorumHeal(f[7], out));
  auto serve = QuorumFlag("serve", f[8]);
  if (!serve.ok()) return serve.status();
  out.serve = *serve;
  return out;
}

std::string FormatFinished(int64_t step) { return "finished " + std::to_string(step) + "\n"; }

std::optional<int64_t> ParseFinished(std::string_view line) {
  const std::string rest = TextAfterVerb(line, "finished");
  char* end = nullptr;
  const long long step = std::strtoll(rest.c_str(), &end, 10);
  if (rest.empty() || *end != '\0' || step < 0) return std::nullopt;
  return static_cast<int64_t>(step);
}

std::string FormatBye() { return "bye\n"; }

std::string FormatAbort(std::string_view reason) { return OneLine("abort", reason); }
std::string FormatError(std::string_view message) { return OneLine("error", message); }

bool VerbIs(std::string_view line, std::string_view verb) {
  return line.substr(0, verb.size()) == verb && (line.size() == verb.size() || line[verb.size()] == ' ');
}

std::string TextAfterVerb(std::string_view line, std::string_view verb) {
  if (line.size() <= verb.size() + 1) return "";
  return std::string(line.substr(verb.size() + 1));
}

}  // namespace ctrun::ft_wire
