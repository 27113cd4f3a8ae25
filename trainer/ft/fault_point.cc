#include "trainer/ft/fault_point.h"

#include <sys/stat.h>

#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

namespace ctrun::trainer::ft {

Result<std::optional<FtFault>> ParseFtFault(const char* fault, const char* restart_count) {
  if (fault == nullptr || *fault == '\0') return std::optional<FtFault>();
  const std::string text(fault);
  const Status bad = Status::InvalidArgument("CTRUN_FT_FAULT '" + text +
                                             "': use LOCAL_RANK:STEP:POINT with POINT train, vote or serve "
                                             "(e.g. 1:5:train)");
  const size_t a = text.find(':');
  const size_t b = a == std::string::npos ? a : text.find(':', a + 1);
  if (b == std::string::npos) return bad;
  char* end = nullptr;
  const long rank = std::strtol(text.c_str(), &end, 10);
  if (end != text.c_str() + a || rank < 0) return bad;
  const long long step = std::strtoll(text.c_str() + a + 1, &end, 10);
  if (end != text.c_str() + b || step < 0) return bad;
  const std::string point = text.substr(b + 1);
  FtFault out{.local_rank = static_cast<int>(rank), .step = step, .point = FaultPoint::kTrain};
  if (point == "vote") {
    out.point = FaultPoint::kVote;
  } else if (point == "serve") {
    out.point = FaultPoint::kServe;
  } else if (point != "train") {
    return bad;
  }
  if (restart_count != nullptr && std::string(restart_count) != "0") return std::optional<FtFault>();
  return std::optional<FtFault>(out);
}

void MaybeFail(const std::optional<FtFault>& fault, int local_rank, int64_t step, FaultPoint point) {
  if (fault && fault->local_rank == local_rank && fault->step == step && fault->point == point) {
    std::raise(SIGKILL);
  }
}

HealServer::SendHook ServeFault(const std::optional<FtFault>& fault, int local_rank) {
  if (!fault || fault->point != FaultPoint::kServe) return nullptr;
  return [fault, local_rank](int64_t step, std::size_t) { MaybeFail(fault, local_rank, step, FaultPoint::kServe); };
}

Result<std::optional<FtHold>> ParseFtHold(const char* hold, const char* restart_count) {
  if (hold == nullptr || *hold == '\0') return std::optional<FtHold>();
  const std::string text(hold);
  if (text.rfind("join:", 0) == 0 && text.size() > 5) {
    if (restart_count == nullptr || std::string(restart_count) == "0") return std::optional<FtHold>();
    return std::optional<FtHold>(FtHold{.step = FtHold::kJoin, .path = text.substr(5)});
  }
  const size_t colon = text.find(':');
  char* end = nullptr;
  const long long step = std::strtoll(text.c_str(), &end, 10);
  if (colon == std::string::npos || end != text.c_str() + colon || step < 0 || colon + 1 == text.size()) {
    return Status::InvalidArgument("CTRUN_FT_HOLD '" + text + "': use STEP:PATH or join:PATH (e.g. 8:/tmp/release)");
  }
  return std::optional<FtHold>(FtHold{.step = step, .path = text.substr(colon + 1)});
}

Result<std::optional<int64_t>> ReadFtStop(const char* path) {
  if (path == nullptr || *path == '\0') return std::optional<int64_t>();
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return std::optional<int64_t>();
  char text[32] = {};
  const size_t n = std::fread(text, 1, sizeof text - 1, f);
  std::fclose(f);
  std::string_view s(text, n);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  int64_t step = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), step);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || step < 0) {
    return Status::InvalidArgument("CTRUN_FT_STOP: " + std::string(path) + " holds '" + std::string(s) +
                                   "', not a step: write a whole number >= 0");
  }
  return std::optional<int64_t>(step);
}

Status MaybeHold(const std::optional<FtHold>& hold, int64_t step) {
  if (!hold || hold->step != step) return Status::Ok();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  struct stat st {};
  while (::stat(hold->path.c_str(), &st) != 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::DeadlineExceeded("CTRUN_FT_HOLD: " + hold->path + " did not appear within 300 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Status::Ok();
}

}  // namespace ctrun::trainer::ft
