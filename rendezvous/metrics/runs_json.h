// RunsJson: every run a server holds, as the JSON document that GET
// /api/runs answers and the status page polls (schema: docs/metrics.md,
// "The runs as JSON").
//
// Pure: built from each run's RunView (the machine's read-only view) and its
// RunHistory, with the instant of the request; every time in it is "seconds
// before now". No I/O, no clock reads; thread-safe (no shared state).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "rendezvous/machine/run_view.h"
#include "rendezvous/metrics/run_history.h"

namespace ctrun::rdzv {

// The version field of the document; raised when a field changes meaning or
// goes away (new fields may be added without it).
inline constexpr int kRunsJsonVersion = 1;

struct RunStatus {
  std::string run_id;
  RunView view;
  const RunHistory* history = nullptr;  // null: nothing recorded; must outlive the RunsJson call
};

// The document for `runs` (in the given order) at `now`, one line, ending
// in a newline. Strings are escaped; bytes that are not valid UTF-8 become
// U+FFFD, so the result is always valid JSON in UTF-8.
std::string RunsJson(const std::vector<RunStatus>& runs, TimePoint now);

// The document's "why" object of one run (the verdict on its reported
// failures: docs/metrics.md), or "null" when none was reported; what
// `ctrun status --why --json` prints.
std::string WhyJson(const RunView& view);

// `text` as a JSON string literal, quotes included (see RunsJson for
// invalid UTF-8).
std::string JsonString(std::string_view text);

}  // namespace ctrun::rdzv
