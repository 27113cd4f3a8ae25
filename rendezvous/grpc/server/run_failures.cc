#include "rendezvous/grpc/server/run_failures.h"

#include <spdlog/fmt/fmt.h>

#include <chrono>

#include "rendezvous/grpc/convert/failure_convert.h"
#include "rendezvous/grpc/convert/proto_convert.h"

namespace ctrun::rdzv {
namespace {

double NowUnixS() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

grpc::Status RunFailures::CheckReport(const v1::ReportFailureRequest& request,
                                      std::vector<WorkerFailureInfo>& failures) {
  if (static_cast<size_t>(request.failures_size()) > kMaxFailuresPerReport) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        fmt::format("failure report: failures holds {} workers, more than {}: send the rest in "
                                    "another report",
                                    request.failures_size(), kMaxFailuresPerReport));
  }
  if (request.node().addr().size() > kMaxFailureHost) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        fmt::format("failure report: node.addr is {} bytes, more than {}: send the node's address",
                                    request.node().addr().size(), kMaxFailureHost));
  }
  failures = FailuresFromRequest(request);
  if (Status bad = CheckFailureReport(request.host(), failures); !bad.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, bad.message());
  }
  return grpc::Status::OK;
}

std::string RunFailures::AddReport(const v1::ReportFailureRequest& request,
                                   const std::vector<WorkerFailureInfo>& failures, TimePoint now) {
  const NodeId node = NodeFromProto(request.node());
  records_[request.run_id()].Add(node, request.host(), request.round(), failures, now);
  return fmt::format("rendezvous run '{}': node {} reported {} failed worker{} (round {})", request.run_id(),
                     ToString(node), failures.size(), failures.size() == 1 ? "" : "s", request.round());
}

void RunFailures::AddUnhealthy(const std::string& run_id, const NodeId& node, uint64_t round,
                               const std::string& report) {
  // `ctrun status --why`'s unhealthy_node: the report's first line.
  const std::string first = report.substr(0, report.find('\n'));
  records_[run_id].AddNode(node, round, /*lost=*/false, first, NowUnixS(), Clock::now());
}

void RunFailures::AddLost(const std::string& run_id, const NodeId& node, uint64_t round, const std::string& why) {
  records_[run_id].AddNode(node, round, /*lost=*/true, why, NowUnixS(), Clock::now());
}

void RunFailures::AddTo(const std::string& run_id, TimePoint now, RunView& view) const {
  if (auto f = records_.find(run_id); f != records_.end()) AddFailures(f->second, now, view);
}

}  // namespace ctrun::rdzv
