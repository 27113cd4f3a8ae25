#include "launcher/agent/preemption.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "launcher/cli/flag_values.h"
#include "launcher/cli/text.h"

namespace ctrun::launcher {

namespace {

// "0, 2 and 3"
std::string RankList(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += i + 1 == ranks.size() ? " and " : ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}

}  // namespace

double PreemptBudget(double grace_s, std::optional<double> slurm_end_unix_s, double now_unix_s) {
  double budget = grace_s;
  if (slurm_end_unix_s) budget = std::min(budget, *slurm_end_unix_s - now_unix_s - kSlurmMarginS);
  return std::max(budget, 0.0);
}

std::string NoticeLine(const WorkerNotice& notice) {
  nlohmann::ordered_json j{{"deadline_unix_s", notice.deadline_unix_s},
                           {"budget_s", notice.budget_s},
                           {"source", notice.source}};
  return j.dump() + "\n";
}

Status WriteNoticeFile(const std::string& path, const WorkerNotice& notice) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << NoticeLine(notice);
    out.close();
    if (!out) {
      return Status::IOError(fmt::format("cannot write the preemption notice {}: {} (check the log "
                                         "directory's space and permissions)",
                                         tmp, std::strerror(errno)));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::IOError(fmt::format("cannot rename {} to {}: {}", tmp, path, std::strerror(errno)));
  }
  return Status::Ok();
}

PreemptVerdict VerdictOf(const std::vector<std::optional<std::string>>& contents) {
  std::vector<int> absent;
  std::vector<int> garbled;
  std::map<long long, std::vector<int>> by_step;
  for (size_t lr = 0; lr < contents.size(); ++lr) {
    if (!contents[lr]) {
      absent.push_back(static_cast<int>(lr));
      continue;
    }
    const std::optional<long long> step = ParseInt(Trim(*contents[lr]));
    if (!step || *step < 0) {
      garbled.push_back(static_cast<int>(lr));
      continue;
    }
    by_step[*step].push_back(static_cast<int>(lr));
  }
  PreemptVerdict v;
  if (!contents.empty() && absent.size() == contents.size()) {
    v.finished = true;
  } else if (!absent.empty()) {
    v.why = fmt::format("local rank{} {} exited 0 without writing CTRUN_PREEMPT_SAVED_FILE",
                        absent.size() > 1 ? "s" : "", RankList(absent));
  } else if (!garbled.empty()) {
    v.why = fmt::format("local rank{} {} wrote something other than a step number to CTRUN_PREEMPT_SAVED_FILE",
                        garbled.size() > 1 ? "s" : "", RankList(garbled));
  } else if (by_step.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [step, ranks] : by_step) {
      parts.push_back(fmt::format("step {} (local rank{} {})", step, ranks.size() > 1 ? "s" : "", RankList(ranks)));
    }
    v.why = "the workers saved different steps: " + fmt::format("{}", fmt::join(parts, ", "));
  } else if (by_step.empty()) {
    v.why = "no worker ran";
  } else {
    v.saved = true;
    v.step = by_step.begin()->first;
  }
  return v;
}

std::string PreemptWaitingLine(int saved, int running, int workers, double stop_in_s) {
  return fmt::format("waiting for the workers to save before the preemption: {} of {} saved, {} still running; "
                     "stopping them in {} s",
                     saved, workers, running, SecondsUp(stop_in_s));
}

int SavedCount(const std::vector<std::string>& markers) {
  int n = 0;
  for (const std::string& path : markers) n += ::access(path.c_str(), F_OK) == 0 ? 1 : 0;
  return n;
}

PreemptVerdict ReadVerdict(const std::vector<std::string>& markers) {
  std::vector<std::optional<std::string>> contents;
  for (const std::string& path : markers) {
    std::ifstream in(path);
    if (!in) {
      contents.emplace_back();
      continue;
    }
    std::ostringstream text;
    text << in.rdbuf();
    contents.emplace_back(text.str().substr(0, 64));
  }
  return VerdictOf(contents);
}

}  // namespace ctrun::launcher
