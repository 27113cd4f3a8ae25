#include "launcher/app/logs_command.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

#include "launcher/cli/exit_codes.h"
#include "launcher/cli/flag_values.h"
#include "launcher/cli/flags.h"
#include "launcher/cli/text.h"
#include "launcher/rdzv/credentials.h"
#include "rendezvous/grpc/client/log_client.h"
#include "rendezvous/grpc/net/grpc_process.h"

namespace ctrun::launcher {
namespace {

// `ctrun logs`'s flags, for ResolveSubcommandFlag: the run's three (the
// launch table's spellings, passed on to ParseStatusArgs), then its own.
enum LogsRow : size_t { kEndpoint, kId, kConf, kFollow, kRank, kNode, kSince, kHelp };
const std::vector<SubcommandFlag>& LogsFlags() {
  static const std::vector<SubcommandFlag> flags = {
      FindFlag("--rdzv-endpoint")->spellings,
      FindFlag("--rdzv-id")->spellings,
      FindFlag("--rdzv-conf")->spellings,
      {"--follow", "-f"},
      {"--rank"},
      {"--node"},
      {"--since"},
      {"--help", "-h"},
  };
  return flags;
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string LogsHelpText() {
  return "usage: ctrun logs [--rdzv-endpoint HOST:PORT] [--rdzv-id ID] [--rdzv-conf K=V,...]\n"
         "                  [--follow] [--rank R] [--node N] [--since SECONDS]\n"
         "\n"
         "Shows every node's worker output in one stream, as the run's rendezvous server (the\n"
         "hosting node's ctrun, or ctrund) keeps it from the agents started with --share-logs:\n"
         "one line per worker line, \"<node>/<rank>: <text>\", in the order the server received\n"
         "them (in order per rank). The server keeps the newest 1,048,576 lines (64 MiB) per run;\n"
         "lines it dropped are counted on stderr.\n"
         "\n"
         "  --rdzv-endpoint, --rdzv_endpoint HOST[:PORT]  the server (default localhost:29400; $PET_RDZV_ENDPOINT)\n"
         "  --rdzv-id, --rdzv_id ID                       the run (default: the server's only run; $PET_RDZV_ID)\n"
         "  --rdzv-conf, --rdzv_conf K=V,...              token_file and tls_* as for a launch ($PET_RDZV_CONF)\n"
         "  -f, --follow                                  keep printing new lines until the server forgets the run\n"
         "  --rank R                                      only global rank R's lines\n"
         "  --node N                                      only node N's lines (its --local-addr, else host name)\n"
         "  --since SECONDS                               only lines read in the last SECONDS (e.g. 30, 1.5)\n"
         "\n"
         "Exit status: 0 shown, 1 the server is unreachable, refused, or does not serve the run, 2 a bad flag.\n";
}

Result<LogsArgs> ParseLogsArgs(const std::vector<std::string>& args, const Environment& env) {
  LogsArgs out;
  std::vector<std::string> target;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const size_t eq = arg.find('=');
    const std::string typed = arg.substr(0, eq);
    Result<size_t> row = ResolveSubcommandFlag(typed, LogsFlags(), "ctrun logs");
    if (!row.ok() && row.status().IsNotFound()) {
      return Status::InvalidArgument("ctrun logs: unknown argument '" + arg +
                                     "' (it takes --rdzv-endpoint, --rdzv-id, --rdzv-conf, --follow, --rank, --node "
                                     "and --since)");
    }
    if (!row.ok()) return row.status();
    // As typed, but an abbreviation named in full (as argparse names it).
    const SubcommandFlag& spellings = LogsFlags()[*row];
    const bool exact = std::find(spellings.begin(), spellings.end(), typed) != spellings.end();
    const std::string name = exact ? typed : std::string(spellings[0]);
    if ((*row == kFollow || *row == kHelp) && eq != std::string::npos) {
      return Status::InvalidArgument("ctrun logs: " + name + " takes no value (write it alone)");
    }
    if (*row == kHelp) {
      out.help = true;
      return out;
    }
    if (*row == kFollow) {
      out.follow = true;
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return Status::InvalidArgument(name + " needs a value (see ctrun logs --help)");
    }
    if (*row == kRank) {
      std::optional<long long> r = ParseInt(value);
      if (!r || *r < 0 || *r > std::numeric_limits<int>::max()) {
        return Status::InvalidArgument("--rank '" + value + "': give a global rank, a whole number >= 0");
      }
      out.rank = static_cast<int>(*r);
    } else if (*row == kNode) {
      if (value.empty()) return Status::InvalidArgument("--node '': give a node's --local-addr or host name");
      out.node = value;
    } else if (*row == kSince) {
      std::optional<double> s = ParseDouble(value);
      if (!s || !std::isfinite(*s) || *s < 0) {
        return Status::InvalidArgument("--since '" + value + "': give seconds before now, a number >= 0 (e.g. 30)");
      }
      out.since_s = *s;
    } else {
      target.push_back(name);
      target.push_back(value);
    }
  }
  Result<StatusArgs> parsed = ParseStatusArgs(target, env);
  if (!parsed.ok()) return parsed.status();
  out.target = std::move(*parsed);
  return out;
}

void AppendLogLine(std::string& out, const std::string& node, int rank, const std::string& text) {
  char digits[16];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, rank);
  (void)ec;  // an int always fits
  out += node;
  out += '/';
  out.append(digits, end);
  out += ": ";
  out += text;
  out += '\n';
}

void AppendLogChunk(std::string& out, const std::string& node, int rank, std::string_view text) {
  if (text.empty()) return;
  char prefix_digits[16];
  const auto [end, ec] = std::to_chars(prefix_digits, prefix_digits + sizeof prefix_digits, rank);
  (void)ec;  // an int always fits
  const size_t digits = static_cast<size_t>(end - prefix_digits);
  const size_t mark = out.size();
  out += node;
  out += '/';
  out.append(prefix_digits, digits);
  out += ": ";
  const size_t prefix = out.size() - mark;  // out[mark, mark + prefix) is the prefix
  for (size_t pos = 0;;) {
    const size_t nl = text.find('\n', pos);
    const size_t stop = nl == std::string_view::npos ? text.size() : nl;
    out.append(text.data() + pos, stop - pos);
    out += '\n';
    pos = stop + 1;
    if (pos >= text.size()) break;
    out.append(out, mark, prefix);  // the next line's prefix
  }
}

std::string FormatLogLine(const std::string& node, int rank, const std::string& text) {
  std::string out;
  out.reserve(node.size() + text.size() + 16);
  AppendLogLine(out, node, rank, text);
  return out;
}

int RunLogsCommand(const std::vector<std::string>& args, const Environment& env) {
  Result<LogsArgs> parsed = ParseLogsArgs(args, env);
  if (!parsed.ok()) {
    std::fprintf(stderr, "ctrun: error: %s\n", parsed.status().message().c_str());
    return kExitUsage;
  }
  if (parsed->help) {
    std::fputs(LogsHelpText().c_str(), stdout);
    return kExitSuccess;
  }
  const StatusArgs& target = parsed->target;
  Result<std::string> token = RendezvousToken(target.config, env);
  Result<rdzv::TlsConfig> tls = token.ok() ? RendezvousTls(target.config.rdzv_conf) : token.status();
  if (!tls.ok()) {
    std::fprintf(stderr, "ctrun: error: %s\n", tls.status().message().c_str());
    return kExitUsage;
  }
  rdzv::RouteGrpcLogsToSpdlog();
  rdzv::ConfigureGrpcProcess();

  rdzv::ClientOptions options;
  options.endpoint = target.endpoint;
  options.run_id = target.run_id;
  options.token = *token;
  options.tls = *tls;
  rdzv::ReadLogsArgs read;
  read.follow = parsed->follow;
  if (parsed->rank) read.rank = *parsed->rank;
  read.node = parsed->node;
  if (parsed->since_s) read.since_unix_s = UnixNow() - *parsed->since_s;
  std::string out;
  const Status s = rdzv::ReadLogChunks(options, read, [&](const std::vector<rdzv::LogReadChunk>& chunks,
                                                          uint64_t dropped) {
    if (dropped > 0) {
      std::fflush(stdout);
      std::fprintf(stderr, "ctrun logs: %llu lines dropped by the server\n", static_cast<unsigned long long>(dropped));
    }
    out.clear();
    for (const rdzv::LogReadChunk& c : chunks) AppendLogChunk(out, c.node, c.rank, c.text);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    return !std::ferror(stdout);  // the reader went away (a closed pipe): stop
  });
  if (!s.ok()) {
    std::fprintf(stderr, "ctrun logs: %s\n", s.message().c_str());
    return kExitFailure;
  }
  return kExitSuccess;
}

}  // namespace ctrun::launcher
