// Worker error files: the JSON that torch's `@record` writes to
// $TORCHELASTIC_ERROR_FILE when a worker dies of an uncaught exception, and
// the copy the agent writes for an outer scheduler (spec §4). Field handling
// follows torch 1.13's errors/__init__.py (ProcessFailure) and
// errors/error_handler.py (ErrorHandler). Stateless functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/status.h"

namespace ctrun::launcher {

// Which of the two accepted shapes a file had.
enum class ErrorFileForm {
  // {"message":{"message":"<Type>: <str>",
  //             "extraInfo":{"py_callstack":"...","timestamp":"<epoch s>"}}}
  // What `@record` writes; the report shows py_callstack, indented.
  kStructured,
  // {"message":"<str>","timestamp":<int>}: the report shows message as is.
  kFlat,
};

struct ErrorFileData {
  // kStructured: message.message ("" if absent). kFlat: the message string.
  std::string message;
  // kStructured: message.extraInfo.py_callstack ("" if absent). kFlat: "".
  std::string traceback;
  // Seconds since the epoch. Always set for kStructured (required there);
  // nullopt for a kFlat file without "timestamp" (torch reads that as 0 and
  // so makes it the root cause; ctrun falls back to the observed time).
  std::optional<int64_t> timestamp;
  // The JSON text exactly as read; "" for data ctrun made up itself.
  std::string raw_json;
  ErrorFileForm form = ErrorFileForm::kStructured;
};

// Parses the text of an error file. A timestamp may be a JSON integer or a
// string holding one (torch applies int() to either).
// Returns InvalidArgument, naming the offending field, when the text is not
// JSON, is not an object, has no "message", has a "message" that is neither a
// string nor an object, has a structured form without a string-or-integer
// extraInfo.timestamp (torch raises KeyError there), or has a field of the
// wrong type.
Result<ErrorFileData> ParseErrorFile(std::string_view text);

// Reads and parses the file at `path`.
// Returns NotFound when there is no file there (the worker wrote none: no
// @record, or killed by a signal), IOError when it cannot be read, and
// ParseErrorFile's InvalidArgument (prefixed with the path) when malformed.
Result<ErrorFileData> ReadErrorFile(const std::string& path);

// What torchrun's own `@record` does with a ChildFailedError when an outer
// scheduler gave the agent a TORCHELASTIC_ERROR_FILE: writes `root_cause` to
// `path`, replacing any file there, atomically (a temporary file in the same
// directory, then rename).
//  - root_cause.raw_json non-empty: that JSON, re-serialised with key order
//    kept; for the structured form "errorCode": exit_code is added to
//    "message" when exit_code != 0 (torch skips 0 and skips the flat form).
//  - raw_json empty (the worker wrote no file): the structured form built from
//    message, traceback (py_callstack, omitted when empty) and timestamp
//    (the current time when nullopt), plus errorCode as above. torch 1.13
//    writes nothing in this case; ctrun gives the scheduler the synthesized
//    message instead.
// Returns IOError naming the path when the file cannot be written or renamed
// (no temporary file is left behind), InvalidArgument when raw_json is not
// valid JSON.
Status WriteAgentErrorFile(const std::string& path, const ErrorFileData& root_cause,
                           int exit_code);

}  // namespace ctrun::launcher
