// The fault-tolerance calls' proto messages (FtParams, FtSyncRequest,
// FtSyncReply, FtLost) to and from the quorum's own vocabulary
// (quorum.h, step_sync.h). Used by the server (server/ft_service.cc) and by
// FtClient: proto types stop at these two.
//
// Pure functions; no validation beyond the conversion (FtRuns checks sizes
// and CheckQuorumParams the params).
#pragma once

#include <cstdint>
#include <string>

#include "rendezvous.pb.h"
#include "rendezvous/machine/quorum.h"
#include "rendezvous/machine/run_view.h"
#include "rendezvous/machine/step_sync.h"

namespace ctrun::rdzv {

// The initial-metadata key (value "1") of an FtWatch the server holds:
// it sends it before any event, so the client knows the watch is open.
inline constexpr char kFtWatchOpenKey[] = "ctrun-ft-watch-open";

// A timeout that is not finite or not positive becomes zero (which
// CheckQuorumParams refuses).
QuorumParams FtParamsFromProto(const v1::FtParams& params);
void FtParamsToProto(const QuorumParams& params, v1::FtParams* out);

// A node's part of its replica group (FtSyncRequest's part and parts).
struct FtPart {
  int64_t part = 0;
  int64_t parts = 1;
};
// parts 0 (a client older than the field) is 1: the whole group.
FtPart FtPartFromProto(const v1::FtSyncRequest& request);

// The request's call: ballot only when the request has one.
SyncCall SyncCallFromProto(const v1::FtSyncRequest& request);
void SyncCallToProto(const SyncCall& call, v1::FtSyncRequest* out);

// compact_sources 0: the whole quorum in `members`; n > 0: the answer's
// group's part (FtCompact, from answer.lookup; built here when the answer
// has none) with at most n heal sources (never more than the quorum's
// members at its max step, whatever n), the quorum's members in it only
// when there are at most kCompactMembersMax, and no `members`.
void SyncAnswerToProto(const SyncAnswer& answer, v1::FtSyncReply* out, uint32_t compact_sources = 0);
// A reply with `compact` gives an answer with `part` set (OwnedPart's form)
// and a quorum of the id alone; one without (an older server, or
// compact_sources 0) the whole quorum and no part.
SyncAnswer SyncAnswerFromProto(const std::string& group, const v1::FtSyncReply& reply);

// The GetState reply's fault-tolerance part (`ctrun status`).
void FtRunViewToProto(const FtRunView& view, v1::FtRunState* out);
FtRunView FtRunViewFromProto(const v1::FtRunState& state);

}  // namespace ctrun::rdzv
