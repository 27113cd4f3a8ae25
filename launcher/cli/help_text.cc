#include "launcher/cli/help_text.h"

#include <fmt/format.h>

#include "launcher/cli/flags.h"
#include "launcher/cli/text.h"

namespace ctrun::launcher {
namespace {

#ifdef CTRUN_VERSION
constexpr std::string_view kVersion = CTRUN_VERSION;
#else
constexpr std::string_view kVersion = "0.1.0";  // keep in step with project() in CMakeLists.txt
#endif

std::string_view GroupTitle(HelpGroup g) {
  switch (g) {
    case HelpGroup::kSize: return "Worker/node size";
    case HelpGroup::kRendezvous: return "Rendezvous";
    case HelpGroup::kLaunch: return "User-code launch";
    case HelpGroup::kLogs: return "Logs";
    case HelpGroup::kCtrun: return "ctrun";
  }
  return "";
}

// Greedy word wrap of `text` to `width` columns, each line indented by `indent`.
std::string Wrap(std::string_view text, size_t indent, size_t width) {
  std::string out;
  size_t col = 0;
  for (std::string_view word : Split(text, ' ')) {
    if (word.empty()) continue;
    if (col == 0 || col + 1 + word.size() > width) {
      if (col != 0) out += '\n';
      out.append(indent, ' ');
      col = indent;
    } else {
      out += ' ';
      ++col;
    }
    out += word;
    col += word.size();
  }
  return out + '\n';
}

}  // namespace

std::string HelpText() {
  std::string out =
      "usage: ctrun [OPTIONS] SCRIPT [SCRIPT_ARGS...]\n"
      "       ctrun status|logs [--rdzv-endpoint HOST:PORT] [--rdzv-id ID] ...\n\n"
      "Examples:\n"
      "  ctrun --nproc-per-node 4 train.py --lr 0.1\n"
      "      one node, 4 workers (RANK, LOCAL_RANK, WORLD_SIZE... as torchrun sets them)\n"
      "  ctrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint node0:29400 \\\n"
      "        --rdzv-id job1 train.py\n"
      "      the same on each of two nodes; node0's agent hosts the rendezvous\n"
      "  ctrund --listen 0.0.0.0:29400 --token-file /etc/ctrun/token\n"
      "      a rendezvous daemon off the training nodes (ctrund --help)\n"
      "  srun --ntasks-per-node=1 ctrun --nproc-per-node 8 train.py\n"
      "      under Slurm: the nodes, the ranks and the endpoint come from SLURM_*\n"
      "  ctrun status --rdzv-endpoint node0:29400 --rdzv-id job1 --why\n"
      "      a run's nodes and rounds, and which rank failed first and why\n"
      "  ctrun logs --rdzv-endpoint node0:29400 --rdzv-id job1 --follow\n"
      "      every node's worker lines in one place (agents run with --share-logs)\n"
      "  ctrun --ft-replicas 2:4 --rdzv-backend c10d --rdzv-endpoint svc:29400 --rdzv-id job1 \\\n"
      "        --no-python ctrun-fashion-mnist --ft\n"
      "      fault tolerance per step: a group that fails is healed while the others train on\n\n"
      "Start NPROC workers of SCRIPT on this node and supervise them (a torchrun replacement).\n"
      "Options must come before SCRIPT; everything after SCRIPT is passed to it unchanged.\n"
      "A value can be given as --flag VALUE or --flag=VALUE, and a flag by a unique prefix\n"
      "(--nproc 4). Options marked [env X] take their default from the environment variable\n"
      "X (the flag wins); on/off options read X as an integer: 0 is off, any other integer on.\n";
  for (HelpGroup g : {HelpGroup::kSize, HelpGroup::kRendezvous, HelpGroup::kLaunch, HelpGroup::kLogs,
                      HelpGroup::kCtrun}) {
    out += fmt::format("\n{}:\n", GroupTitle(g));
    for (const FlagSpec& f : Flags()) {
      if (f.group != g) continue;
      std::string line = "  ";
      for (size_t i = 0; i < f.spellings.size(); ++i) {
        line += fmt::format("{}{}", i ? ", " : "", f.spellings[i]);
      }
      if (!f.metavar.empty()) line += fmt::format(" {}", f.metavar);
      out += line + '\n';
      out += Wrap(f.help, 8, 80);
      std::string extra;
      if (!f.env.empty()) extra = fmt::format("env {}", f.env);
      if (f.default_text != nullptr && f.kind == FlagKind::kValue) {
        extra += fmt::format("{}default: {}", extra.empty() ? "" : ", ", *f.default_text ? f.default_text : "\"\"");
      }
      if (!extra.empty()) out += fmt::format("        [{}]\n", extra);
    }
  }
  out +=
      "\nEnvironment:\n"
      "  TORCH_ELASTIC_SHUTDOWN_TIMEOUT          seconds between the stop signal and SIGKILL, when\n"
      "                                          --shutdown-timeout is not given [default: 30]\n"
      "  TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE   console line prefix, e.g. [${role_name}${local_rank}]:\n"
      "  PYTHON_EXEC                             python interpreter [default: first python3 on PATH]\n"
      "\nQueries (each has its own --help):\n"
      "  ctrun status [--rdzv-endpoint HOST:PORT] [--rdzv-id ID]   a run as its rendezvous server sees it\n"
      "  ctrun logs [--rdzv-endpoint HOST:PORT] [--rdzv-id ID] [--follow]\n"
      "                                          every node's worker lines (agents run with --share-logs)\n";
  return out;
}

std::string VersionText() { return fmt::format("ctrun {}\n", kVersion); }

}  // namespace ctrun::launcher
