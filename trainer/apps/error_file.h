// torchrun's error-file contract for the example workers: a failed worker
// writes its one-line message to TORCHELASTIC_ERROR_FILE as
// {"message": ..., "timestamp": ...}, and the launcher's failure report shows
// it as the root cause instead of "exit code 1". Bad flags (exit 2) are
// written too. Thread model: free functions, call from main only.
#pragma once

#include <string>

namespace ctrun::trainer {

// Writes `message` to $TORCHELASTIC_ERROR_FILE (truncating it); nothing when
// the variable is unset or empty, or the file cannot be opened.
void WriteErrorFile(const std::string& message);

// `message` as a JSON string body: quotes, backslashes and control
// characters escaped (exposed for tests).
std::string JsonEscape(const std::string& message);

}  // namespace ctrun::trainer
