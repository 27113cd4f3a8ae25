#include "launcher/app/status_command.h"

#include <spdlog/fmt/fmt.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "launcher/app/status_why.h"
#include "launcher/cli/exit_codes.h"
#include "launcher/cli/flag_values.h"
#include "launcher/cli/flags.h"
#include "launcher/rdzv/credentials.h"
#include "rendezvous/grpc/client/client.h"
#include "rendezvous/grpc/net/grpc_process.h"
#include "rendezvous/grpc/server/server.h"
#include "rendezvous/metrics/runs_json.h"

namespace ctrun::launcher {

namespace {

constexpr std::string_view kStatusFlags[] = {"--rdzv-endpoint", "--rdzv-id", "--rdzv-conf"};
constexpr int kDefaultPort = 29400;
constexpr std::chrono::seconds kTimeout{10};

// `ctrun status`'s flags, for ResolveSubcommandFlag: the kStatusFlags rows
// (the launch table's spellings), then --why and --help.
const std::vector<SubcommandFlag>& StatusFlags() {
  static const std::vector<SubcommandFlag> flags = [] {
    std::vector<SubcommandFlag> out;
    for (std::string_view name : kStatusFlags) out.push_back(FindFlag(name)->spellings);
    out.push_back({"--why"});
    out.push_back({"--json"});
    out.push_back({"--help", "-h"});
    return out;
  }();
  return flags;
}
constexpr size_t kWhyRow = std::size(kStatusFlags);
constexpr size_t kJsonRow = kWhyRow + 1;
constexpr size_t kHelpRow = kWhyRow + 2;

Status Apply(const FlagSpec& spec, std::string_view source, std::string_view value, LaunchConfig& config) {
  Status s = spec.apply(value, config);
  if (s.ok()) return s;
  return Status::InvalidArgument(fmt::format("{} '{}': {}", source, value, s.message()));
}

std::string SecondsText(double s) { return s < 10 ? fmt::format("{:.1f} s", s) : fmt::format("{:.0f} s", s); }

}  // namespace

std::string StatusHelpText() {
  return "usage: ctrun status [--rdzv-endpoint HOST:PORT] [--rdzv-id ID] [--rdzv-conf K=V,...] [--why] [--json]\n"
         "\n"
         "Shows a run as its rendezvous server (the hosting node's ctrun, or ctrund) sees it:\n"
         "the round, whether it is forming, running or closed, and every node with its group\n"
         "rank, workers, address and the time since its last keep-alive. For a fault-tolerant\n"
         "run (--ft-replicas), the per-step quorum: its id, each replica group's committed step,\n"
         "the groups lost or waiting.\n"
         "\n"
         "  --rdzv-endpoint, --rdzv_endpoint HOST[:PORT]  the server (default localhost:29400; $PET_RDZV_ENDPOINT)\n"
         "  --rdzv-id, --rdzv_id ID                       the run (default: the server's only run; $PET_RDZV_ID)\n"
         "  --rdzv-conf, --rdzv_conf K=V,...              token_file and tls_* as for a launch ($PET_RDZV_CONF)\n"
         "  --why                                         why the job failed: the verdict in one line (the root\n"
         "                                                cause's class, rank, node and evidence), then the root\n"
         "                                                cause's message (from its error file when main has @record,\n"
         "                                                else from its last stderr lines when ctrun read them:\n"
         "                                                --tee 2 or 3, --share-logs, --dedup-logs) and the failures\n"
         "                                                that followed it\n"
         "  --json                                        the same as JSON: with --why the verdict object, else the\n"
         "                                                run as GET /api/runs gives it (docs/metrics.md)\n"
         "\n"
         "Exit status (the same with --why): 0 shown, 1 the server is unreachable or does not serve the\n"
         "run, 2 a bad flag.\n";
}

Result<StatusArgs> ParseStatusArgs(const std::vector<std::string>& args, const Environment& env) {
  StatusArgs out;
  std::vector<const FlagSpec*> given;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    Result<size_t> row = ResolveSubcommandFlag(name, StatusFlags(), "ctrun status");
    if (!row.ok() && row.status().IsNotFound()) {
      return Status::InvalidArgument("ctrun status: unknown argument '" + arg +
                                     "' (it takes only --rdzv-endpoint, --rdzv-id, --rdzv-conf, --why and --json)");
    }
    if (!row.ok()) return row.status();
    if (*row >= kWhyRow && eq != std::string::npos) {
      return Status::InvalidArgument("ctrun status: " + std::string(StatusFlags()[*row][0]) +
                                     " takes no value (write it alone)");
    }
    if (*row == kHelpRow) {
      out.help = true;
      return out;
    }
    if (*row == kWhyRow) {
      out.why = true;
      continue;
    }
    if (*row == kJsonRow) {
      out.json = true;
      continue;
    }
    const FlagSpec* spec = FindFlag(kStatusFlags[*row]);
    // An abbreviation is named in full, as argparse names it.
    const std::string flag = FindFlag(name) ? name : std::string(spec->name);
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return Status::InvalidArgument(flag + " needs a value (e.g. " + flag + " " + std::string(spec->metavar) + ")");
    }
    CTRUN_RETURN_IF_ERROR(Apply(*spec, flag, value, out.config));
    given.push_back(spec);
  }
  bool named_run = false;
  for (std::string_view flag : kStatusFlags) {
    const FlagSpec* spec = FindFlag(flag);
    const bool is_id = flag == "--rdzv-id";
    if (std::find(given.begin(), given.end(), spec) != given.end()) {
      named_run |= is_id;
      continue;
    }
    if (auto it = env.find(std::string(spec->env)); it != env.end()) {
      CTRUN_RETURN_IF_ERROR(Apply(*spec, spec->env, it->second, out.config));
      named_run |= is_id;
    } else if (spec->default_text && !is_id) {  // no run named: the server's only run
      CTRUN_RETURN_IF_ERROR(Apply(*spec, spec->name, spec->default_text, out.config));
    }
  }
  // No endpoint: localhost, as a launch's c10d backend does.
  if (out.config.rdzv_endpoint.empty()) out.config.rdzv_endpoint = "localhost";
  Result<Endpoint> endpoint = ParseEndpoint(out.config.rdzv_endpoint, kDefaultPort);
  if (!endpoint.ok()) {
    return Status::InvalidArgument("--rdzv-endpoint '" + out.config.rdzv_endpoint + "': " +
                                   endpoint.status().message());
  }
  const bool v6 = endpoint->host.find(':') != std::string::npos;
  out.endpoint = (v6 ? "[" + endpoint->host + "]" : endpoint->host) + ":" + std::to_string(endpoint->port);
  out.run_id = named_run ? out.config.rdzv_id : std::string();
  return out;
}

// The nodes that left as unhealthy, each with its report (the failed
// check's last output lines, indented); "" when there are none.
std::string FormatUnhealthy(const rdzv::RunView& view) {
  if (view.counts.unhealthy == 0) return "";
  std::string out = fmt::format("unhealthy nodes: {} (the job ends above {}, --max-unhealthy-nodes)\n",
                                view.counts.unhealthy, view.counts.max_unhealthy);
  for (const rdzv::UnhealthyNode& u : view.unhealthy) {
    out += "  " + rdzv::ToString(u.node) + ":\n";
    std::string::size_type start = 0;
    while (start < u.report.size()) {
      std::string::size_type end = u.report.find('\n', start);
      if (end == std::string::npos) end = u.report.size();
      out += "    " + u.report.substr(start, end - start) + "\n";
      start = end + 1;
    }
  }
  return out;
}

namespace {

// The rendezvous part of FormatStatus: the round and a line per node.
std::string FormatRendezvous(const std::string& run_id, const std::string& endpoint, const rdzv::RunView& view);

// The per-step quorum of a fault-tolerant run (--ft-replicas): its id and
// members with their committed steps, why the last decision went as it did
// (e.g. groups held back for being late), the groups waiting for the next one.
std::string FormatFt(const rdzv::FtRunView& ft) {
  std::string out = fmt::format("fault tolerance: replicas {}..{}, ", ft.min_replicas, ft.max_replicas);
  if (!ft.quorum) {
    out += fmt::format("no quorum yet ({})\n", ft.reason);
  } else {
    out += fmt::format("quorum {} of {} replica groups, training step {}\n", ft.quorum->id,
                       ft.quorum->members.size(), ft.quorum->max_step());
    if (!ft.reason.empty()) out += fmt::format("last decision: {}\n", ft.reason);
  }
  std::vector<std::string> groups = ft.groups;
  if (ft.quorum) {
    for (const rdzv::QuorumMember& m : ft.quorum->members) {
      if (std::find(groups.begin(), groups.end(), m.id) == groups.end()) groups.push_back(m.id);
    }
  }
  std::sort(groups.begin(), groups.end());
  size_t width = 5;
  for (const std::string& g : groups) width = std::max(width, g.size());
  out += fmt::format("{:<{}} {:>8}  {}\n", "GROUP", width, "STEP", "STATE");
  for (const std::string& g : groups) {
    std::string step = "-";
    std::string state = "not in the quorum";
    if (ft.quorum) {
      if (auto rank = ft.quorum->rank_of(g)) {
        step = std::to_string(ft.quorum->members[*rank].step);
        state = fmt::format("replica {}", *rank);
      }
    }
    if (std::find(ft.groups.begin(), ft.groups.end(), g) == ft.groups.end()) state += ", lost";
    if (std::find(ft.waiting.begin(), ft.waiting.end(), g) != ft.waiting.end()) state += ", waiting for the next quorum";
    out += fmt::format("{:<{}} {:>8}  {}\n", g, width, step, state);
  }
  return out;
}

}  // namespace

std::string FormatStatus(const std::string& run_id, const std::string& endpoint, const rdzv::RunView& view) {
  if (!view.has_rendezvous) {
    return fmt::format("run '{}' on {}: a fault-tolerant quorum (each replica group runs its own rendezvous)\n",
                       run_id, endpoint) +
           (view.ft ? FormatFt(*view.ft) : "");
  }
  return FormatRendezvous(run_id, endpoint, view) + (view.ft ? FormatFt(*view.ft) : "");
}

namespace {

std::string FormatRendezvous(const std::string& run_id, const std::string& endpoint, const rdzv::RunView& view) {
  const rdzv::Counts& c = view.counts;
  std::string state;
  if (c.closed) {
    state = "closed";
  } else if (c.complete) {
    state = fmt::format("running, world size {}", view.world_size);
  } else {
    state = fmt::format("forming, {}/{} nodes (min {})", c.participants, c.max_nodes, c.min_nodes);
    if (c.rejoining > 0) state += fmt::format(", {} expected back", c.rejoining);
    if (c.last_call_deadline) {
      const double in = std::chrono::duration<double>(*c.last_call_deadline - std::chrono::steady_clock::now()).count();
      state += ", last call in " + SecondsText(std::max(0.0, in));
    }
  }
  std::string out = fmt::format("run '{}' on {}: round {}, {}; nodes {}..{}, {} live\n", run_id, endpoint, c.round,
                                state, c.min_nodes, c.max_nodes, c.live_nodes);
  if (view.nodes.empty()) return out + "no nodes\n" + FormatUnhealthy(view);
  size_t node_width = 4, addr_width = 4;
  for (const rdzv::NodeView& n : view.nodes) {
    node_width = std::max(node_width, rdzv::ToString(n.node).size());
    addr_width = std::max(addr_width, n.addr.size());
  }
  // The STEP column (each node's median step time) only once some agent
  // reports step times (workers with a heartbeat file).
  const bool steps = std::any_of(view.nodes.begin(), view.nodes.end(),
                                 [](const rdzv::NodeView& n) { return n.median_step_s.has_value(); });
  out += fmt::format("{:<5} {:<11} {:<{}} {:>7}  {:<{}}  {}{}\n", "RANK", "STATE", "NODE", node_width, "WORKERS",
                     "ADDR", addr_width, steps ? "STEP      " : "", "LAST KEEP-ALIVE");
  std::string stragglers;
  for (const rdzv::NodeView& n : view.nodes) {
    std::string step;
    if (steps) step = fmt::format("{:<10}", n.median_step_s ? fmt::format("{:.3f} s", *n.median_step_s) : "-");
    out += fmt::format("{:<5} {:<11} {:<{}} {:>7}  {:<{}}  {}{} ago\n",
                       n.group_rank ? std::to_string(*n.group_rank) : "-", n.state, rdzv::ToString(n.node), node_width,
                       n.local_world_size > 0 ? std::to_string(n.local_world_size) : "-", n.addr.empty() ? "-" : n.addr,
                       addr_width, step, SecondsText(n.last_seen_s));
    for (int r : n.straggler_ranks) {
      stragglers += fmt::format("{}rank {} on {}", stragglers.empty() ? "" : ", ", r, rdzv::ToString(n.node));
    }
  }
  if (!stragglers.empty()) out += "stragglers: " + stragglers + "\n";
  return out + FormatUnhealthy(view);
}

}  // namespace

int RunStatusCommand(const std::vector<std::string>& args, const Environment& env) {
  Result<StatusArgs> parsed = ParseStatusArgs(args, env);
  if (!parsed.ok()) {
    std::fprintf(stderr, "ctrun: error: %s\n", parsed.status().message().c_str());
    return kExitUsage;
  }
  if (parsed->help) {
    std::fputs(StatusHelpText().c_str(), stdout);
    return kExitSuccess;
  }
  Result<std::string> token = RendezvousToken(parsed->config, env);
  Result<rdzv::TlsConfig> tls = token.ok() ? RendezvousTls(parsed->config.rdzv_conf) : token.status();
  if (!tls.ok()) {
    std::fprintf(stderr, "ctrun: error: %s\n", tls.status().message().c_str());
    return kExitUsage;
  }
  rdzv::RouteGrpcLogsToSpdlog();
  rdzv::ConfigureGrpcProcess();

  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  rdzv::ClientOptions options;
  options.endpoint = parsed->endpoint;
  options.run_id = parsed->run_id;
  options.token = *token;
  options.tls = *tls;
  std::optional<Result<rdzv::RunView>> answer;
  {
    rdzv::RendezvousClient client(options, [&io](std::function<void()> f) { boost::asio::post(io, std::move(f)); });
    client.GetStatus(kTimeout, [&](const Result<rdzv::RunView>& r) {
      answer = r;
      work.reset();
    });
    io.run();
  }
  if (!answer->ok()) {
    std::fprintf(stderr, "ctrun status: %s\n", answer->status().message().c_str());
    return kExitFailure;
  }
  const std::string run_id = (*answer)->run_id.empty() ? parsed->run_id : (*answer)->run_id;
  if (parsed->json) {
    const std::string json = parsed->why ? rdzv::WhyJson(**answer) + "\n"
                                         : rdzv::RunsJson({rdzv::RunStatus{run_id, **answer, nullptr}}, Clock::now());
    std::fputs(json.c_str(), stdout);
    return kExitSuccess;
  }
  const std::string text =
      parsed->why ? FormatWhy(**answer) : FormatStatus((*answer)->run_id.empty() ? parsed->run_id : (*answer)->run_id,
                                                       parsed->endpoint, **answer);
  std::fputs(text.c_str(), stdout);
  return kExitSuccess;
}

}  // namespace ctrun::launcher
