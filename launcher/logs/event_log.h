// EventLog: --events-file (CTRUN_EVENTS_FILE). One JSON object per line for
// each agent event: the rendezvous started, a round completed (with its
// members' sizes and the master), a worker started or exited (with its code),
// a membership change, a missed heartbeat, a restart (with its cause), a
// signal, the end. Every line carries "ts" (Unix time, seconds), "run_id",
// "node" (this host's name), "node_id" (this agent as the rendezvous knows
// it: --local-addr or the host name, '#', the agent's pid) and "event".
//
// Each line goes out in one write(2) on a file opened O_APPEND, so the agents
// of several nodes may share a file on one host. Write errors are logged once
// and otherwise ignored: events never stop a job.
//
// With --event-log-handler console each line also goes to stderr (one
// write each); an EventLog may have the stderr sink alone.
//
// Ownership: owns its file descriptor. Thread model: one thread.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/result.h"

namespace ctrun::launcher {

class EventLog {
 public:
  // Opens (creates, appends to) `path`. IOError naming the path on failure.
  // `node_id` is written as "node_id" on every line.
  static Result<std::unique_ptr<EventLog>> Open(const std::string& path, std::string run_id,
                                                std::string node_id);
  // An EventLog that writes to stderr only.
  static std::unique_ptr<EventLog> ToStderr(std::string run_id, std::string node_id);
  // Also write every line to stderr.
  void AlsoToStderr() { to_stderr_ = true; }
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Writes {"ts", "run_id", "node", "node_id", "event", ...fields} as one line; `fields`
  // must be a JSON object (or null).
  void Emit(std::string_view event, const nlohmann::ordered_json& fields = nullptr);

 private:
  EventLog(int fd, std::string run_id, std::string node_id);
  int fd_;  // -1: no file
  bool to_stderr_ = false;
  std::string run_id_;
  std::string node_;
  std::string node_id_;
  bool warned_ = false;
};

}  // namespace ctrun::launcher
