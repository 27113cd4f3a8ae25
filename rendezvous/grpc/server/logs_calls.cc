// RendezvousServer::Impl's shared-log handlers (server_impl.h; LogHub,
// log_hub.h, holds the logs and the streams): each call is admitted here
// (token, version, a run the server holds) and then served by the hub.
#include <string>
#include <vector>

#include "rendezvous/grpc/server/log_hub.h"
#include "rendezvous/grpc/server/server_impl.h"

namespace ctrun::rdzv {

grpc::Status RendezvousServer::Impl::AdmitLogCall(const grpc::CallbackServerContext& context,
                                                  v1::ProtocolVersion version, const std::string& token,
                                                  std::string& run_id, bool only_run, RunRegistry::Asker asker) {
  grpc::Status status = call_check_.Check(context, version, token, run_id);
  if (!status.ok()) return status;
  Outbox out;
  {
    std::lock_guard<CheckedMutex> lock(mu_);
    ForgetDue(Clock::now(), out);
    run_id = QueryRun(run_id, only_run, status);
    if (status.ok()) (void)Usable(run_id, status, asker);
  }
  out.Flush();
  return status;
}

std::vector<bool> RendezvousServer::Impl::RunsKnown(const std::vector<std::string>& run_ids) {
  std::vector<bool> known(run_ids.size(), true);
  Outbox out;
  {
    std::lock_guard<CheckedMutex> lock(mu_);
    if (stopping_) return known;
    ForgetDue(Clock::now(), out);
    for (size_t i = 0; i < run_ids.size(); ++i) known[i] = registry_.Find(run_ids[i]).ok();
  }
  out.Flush();
  return known;
}

grpc::ServerReadReactor<v1::LogBatch>* RendezvousServer::Impl::ShipLogs(grpc::CallbackServerContext* context,
                                                                        v1::ShipLogsReply* reply) {
  return logs_->StartShip(context, reply, [this](const grpc::CallbackServerContext& c, const v1::LogBatch& first) {
    std::string run_id = first.run_id();
    return AdmitLogCall(c, first.version(), first.token(), run_id);
  });
}

grpc::ServerWriteReactor<v1::LogLines>* RendezvousServer::Impl::ReadLogs(grpc::CallbackServerContext* context,
                                                                         const v1::ReadLogsRequest* request) {
  v1::ReadLogsRequest query = *request;
  std::string run_id = query.run_id();
  grpc::Status status =
      AdmitLogCall(*context, query.version(), query.token(), run_id, query.only_run(), RunRegistry::Asker::kQuery);
  if (!status.ok()) return LogHub::Refuse(status);
  query.set_run_id(run_id);
  return logs_->StartRead(context, query);
}

}  // namespace ctrun::rdzv
