// The client side of the shared logs (proto/rendezvous.proto's ShipLogs and
// ReadLogs): an agent's log sink (--share-logs) and `ctrun logs`' reader.
// Proto types stop here: callers see rdzv::LogRecord.
//
// Both use the endpoint, token and TLS settings of ClientOptions, and a
// channel made as RendezvousClient makes its own (same arguments and
// credentials: gRPC shares the connection). Neither waits for a server that
// is not up: a call fails at once with Unavailable.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "rendezvous/grpc/client/client.h"
#include "rendezvous/grpc/convert/log_limits.h"
#include "rendezvous/logs/log_record.h"
#include "rendezvous/logs/log_sink.h"

namespace ctrun::rdzv {

// A factory of ShipLogs streams for run options.run_id, from options.node,
// its lines labelled `host` (cut to kMaxLogHostBytes). The factory shares
// one channel between the sinks it makes; each sink is one stream, good
// until its first error. Thread model: LogSink's.
LogSinkFactory MakeLogSinkFactory(const ClientOptions& options, std::string host);

struct ReadLogsArgs {
  bool follow = false;          // keep reading new lines until the server ends the stream
  std::optional<int32_t> rank;  // only this global rank's lines
  std::string node;             // only this node's lines ("" all)
  double since_unix_s = 0;      // only lines read at or after this time (0 all)
};

// Called with each message's lines (in the server's order) and the count of
// lines dropped before them; return false to stop reading.
using LogLinesCallback = std::function<bool(const std::vector<LogRecord>& lines, uint64_t dropped)>;

// Reads run options.run_id's shared log (an empty id: the server's only
// run, as RendezvousClient::GetStatus) from the server (ReadLogs), calling
// `on_lines` on this thread, until the server ends the stream (without
// follow: after the lines it keeps; with follow: when it forgets the run or
// shuts down) or `on_lines` returns false. OK then; Unavailable naming the
// endpoint when the server is unreachable, FailedPrecondition for a refusal
// (token, TLS, version), NotFound for a run the server does not know,
// ResourceExhausted when it serves too many readers.
Status ReadLogs(const ClientOptions& options, const ReadLogsArgs& args, const LogLinesCallback& on_lines);

// Called with each message's lines as chunks (in the server's order) and
// the count of lines dropped before them; return false to stop reading.
using LogChunksCallback = std::function<bool(const std::vector<LogReadChunk>& chunks, uint64_t dropped)>;

// ReadLogs, asking the server for chunks of lines (ReadLogsRequest.chunks):
// the rank, time, node and number travel once per chunk, not once per line.
// A server that sends single lines (one that predates chunks) is read too:
// each of its lines is handed out as a chunk of one line. The next message
// is read (a thread of its own, read_ahead.h) while `on_chunks` handles this
// one, so the server's next write does not wait for the callback. Same ends
// and errors as ReadLogs.
Status ReadLogChunks(const ClientOptions& options, const ReadLogsArgs& args, const LogChunksCallback& on_chunks);

}  // namespace ctrun::rdzv
