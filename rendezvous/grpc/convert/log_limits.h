// The shared logs' wire bounds both ends agree on (proto/rendezvous.proto's
// ShipLogs): the agents' sinks (client/log_client.h) stay within them and
// the server (server/log_hub.h) refuses a batch or a host label over them.
#pragma once

#include <cstddef>

namespace ctrun::rdzv {

// The most bytes of lines (ChargedBytes) the sinks put in one LogBatch; the
// server refuses a batch over kMaxLogBatchBytes on the wire.
inline constexpr size_t kMaxLogBatchBytes = 1 << 20;
// The longest host label of a batch; a sink cuts its label to it.
inline constexpr size_t kMaxLogHostBytes = 256;

}  // namespace ctrun::rdzv
