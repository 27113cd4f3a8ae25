// LogSink: where an agent's shared log lines go (--share-logs): one stream
// to the rendezvous server (rendezvous/grpc/client/log_client.h makes the gRPC
// one). The agent's LogShipper (launcher/logs/ship/log_shipper.h) drives it from
// its own thread.
//
// Thread model: Send and Finish from one thread; Cancel from any thread,
// while the object lives.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "rendezvous/logs/log_record.h"

namespace ctrun::rdzv {

class LogSink {
 public:
  virtual ~LogSink() = default;

  // Sends `chunks` (whole lines; the server cuts each to kMaxLogLineBytes)
  // and the count of lines dropped before them. May take the chunks' text
  // (left unspecified: the caller discards them). Blocks until
  // the transport took them (flow control) or the stream broke. OK, or why
  // the stream is unusable (then make a new sink): Unavailable (the server
  // is unreachable or went away), FailedPrecondition (refused: token,
  // version), NotFound (the server does not know the run),
  // InvalidArgument (the server refused the batch).
  virtual Status Send(std::vector<LogChunk>& chunks, uint64_t dropped) = 0;
  // Ends the stream and waits at most `timeout` for the server's answer.
  virtual Status Finish(Duration timeout) = 0;
  // Makes a blocked or later Send/Finish return at once (Aborted).
  virtual void Cancel() = 0;
  // The bytes of the messages sent so far, as encoded on the wire (without
  // the transport's framing).
  virtual uint64_t WireBytes() const = 0;
};

// Makes a sink (a new stream); never null.
using LogSinkFactory = std::function<std::unique_ptr<LogSink>()>;

}  // namespace ctrun::rdzv
