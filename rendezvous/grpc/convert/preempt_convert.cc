#include "rendezvous/grpc/convert/preempt_convert.h"

#include <algorithm>
#include <chrono>

#include "rendezvous/grpc/convert/proto_convert.h"

namespace ctrun::rdzv {

void PreemptNoticeToProto(const PreemptNotice& notice, v1::PreemptNotice* out) {
  NodeToProto(notice.from, out->mutable_node());
  out->set_remaining_s(notice.remaining_s);
  out->set_source(notice.source);
}

PreemptNotice PreemptNoticeFromProto(const NodeId& self, const v1::PreemptNotice& notice) {
  return PreemptNotice{NodeFromProto(notice.node()), notice.remaining_s(), notice.source(), {self}};
}

void PreemptStateToProto(const PreemptRecord& record, TimePoint now, v1::PreemptState* out) {
  NodeToProto(record.node, out->mutable_node());
  out->set_source(record.source);
  out->set_remaining_s(record.remaining_s);
  out->set_age_s(std::max(0.0, std::chrono::duration<double>(now - record.at).count()));
  out->set_notices(record.notices);
}

}  // namespace ctrun::rdzv
