// The status page: one self-contained HTML document (inline CSS and
// JavaScript, no external assets, no framework) that ctrund --metrics-port
// serves at GET /. It polls GET /api/runs (runs_json.h) every 2 s and shows
// each run's nodes, rounds and restarts, and, once workers failed, the
// verdict on why (docs/metrics.md, "The status page").
//
// The page inserts every string from the JSON as text, never as HTML, so a
// run id or node address cannot inject markup.
#pragma once

#include <string_view>

namespace ctrun::rdzv {

// The whole document; a constant with static lifetime.
std::string_view StatusPageHtml();

}  // namespace ctrun::rdzv
