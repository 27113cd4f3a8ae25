// Conversions of preemption notices between proto/rendezvous.proto and the
// machine's vocabulary (events.h PreemptNotice, preempt.h PreemptRecord),
// for the server and the client. Kept apart from proto_convert.h (which
// calls these for the Join stream's PreemptNotice update).
//
// Pure functions; thread-safe.
#pragma once

#include "base/clock.h"
#include "rendezvous.pb.h"
#include "rendezvous/machine/events.h"
#include "rendezvous/machine/preempt.h"

namespace ctrun::rdzv {

// The Join stream's PreemptNotice (the addressees are not sent).
void PreemptNoticeToProto(const PreemptNotice& notice, v1::PreemptNotice* out);
// The client's side, addressed to `self`.
PreemptNotice PreemptNoticeFromProto(const NodeId& self, const v1::PreemptNotice& notice);

// GetState's preempt field: the run's first notice, its age at `now`, and
// how many the run got.
void PreemptStateToProto(const PreemptRecord& record, TimePoint now, v1::PreemptState* out);

}  // namespace ctrun::rdzv
