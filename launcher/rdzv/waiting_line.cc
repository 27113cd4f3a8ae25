#include "launcher/rdzv/waiting_line.h"

#include <algorithm>

#include <fmt/format.h>

#include "launcher/cli/text.h"

namespace ctrun::launcher {
namespace {

std::string Plural(int n, std::string_view word) { return fmt::format("{}{}", word, n == 1 ? "" : "s"); }

}  // namespace

std::string WaitingLine(const rdzv::Counts& counts, std::string_view endpoint, std::string_view run_id,
                        double give_up_in_s, std::optional<double> last_call_in_s) {
  const int have = counts.participants;
  if (have < counts.min_nodes) {
    const int need = counts.min_nodes - have;
    return fmt::format("waiting for {} more {} ({}/{}) at {}, run '{}'; giving up in {} s", need,
                       Plural(need, "node"), have, counts.min_nodes, endpoint, run_id, SecondsUp(give_up_in_s));
  }
  if (last_call_in_s && have < counts.max_nodes) {
    const int room = counts.max_nodes - have;
    return fmt::format("waiting for up to {} more {} ({}/{}) at {}, run '{}'; starting with {} in {} s", room,
                       Plural(room, "node"), have, counts.max_nodes, endpoint, run_id, have,
                       SecondsUp(*last_call_in_s));
  }
  return fmt::format("waiting for the round to start with {} {} at {}, run '{}'; giving up in {} s", have,
                     Plural(have, "node"), endpoint, run_id, SecondsUp(give_up_in_s));
}

}  // namespace ctrun::launcher
