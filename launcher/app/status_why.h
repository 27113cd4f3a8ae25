// `ctrun status --why`: the verdict on a failed job (rendezvous/machine/
// failure_verdict.h) over the failures its nodes reported, as text:
//
//   root cause: rank 4 (node host-b, local rank 0) exited with 1 at 2026-11-28 02:40:01.234 UTC: ValueError: bad batch
//     last line: ValueError: bad batch
//     error file: /tmp/ctrun-x/attempt_0/0/error.json
//   consequences: 5 other failed workers
//     ranks 0-3 on 2 nodes: connection error after 0.4 s
//     rank 5 on 1 node: stopped by its agent after 0.1 s
//
// "no failure reported" when there is none. Pure; thread-safe.
#pragma once

#include <string>

#include "rendezvous/machine/failure_record.h"
#include "rendezvous/machine/run_view.h"

namespace ctrun::launcher {

// One failure as the root-cause line says it: "rank 4 (node H, local rank 0)
// exited with 1 at <UTC time>" ("was killed by SIGKILL" for a signal).
std::string DescribeFailure(const rdzv::ReportedFailure& failure);

// The verdict on `view.failures`, as above; every line ends in '\n'.
std::string FormatWhy(const rdzv::RunView& view);

}  // namespace ctrun::launcher
