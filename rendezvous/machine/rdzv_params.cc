#include "rendezvous/machine/rdzv_params.h"

#include "base/result.h"

#include <cstdio>
#include <string>

namespace ctrun::rdzv {
namespace {

Status CheckPositive(const char* key, Duration d) {
  if (d > Duration::zero()) return Status::Ok();
  return Status::InvalidArgument(std::string("--rdzv-conf ") + key + "=" + FormatSeconds(d) +
                                 ": must be positive (give a number of seconds > 0)");
}

}  // namespace

std::string FormatSeconds(Duration d) {
  double s = std::chrono::duration<double>(d).count();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

Duration KeepAliveTimeout(const Params& params) {
  return params.keep_alive_interval * params.keep_alive_max_attempt;
}

int MaxUnhealthy(const Params& params) {
  return params.max_unhealthy_nodes >= 0 ? params.max_unhealthy_nodes : params.max_nodes - params.min_nodes;
}

Status ValidateParams(const Params& p) {
  std::string nnodes = "--nnodes '" + std::to_string(p.min_nodes) + ":" + std::to_string(p.max_nodes) + "'";
  if (p.min_nodes <= 0) {
    return Status::InvalidArgument(nnodes + ": MIN must be at least 1 (use MIN:MAX with 0 < MIN <= MAX)");
  }
  if (p.min_nodes > p.max_nodes) {
    return Status::InvalidArgument(nnodes + ": MIN must not exceed MAX (use MIN:MAX with 0 < MIN <= MAX)");
  }
  CTRUN_RETURN_IF_ERROR(CheckPositive("join_timeout", p.join_timeout));
  CTRUN_RETURN_IF_ERROR(CheckPositive("last_call_timeout", p.last_call_timeout));
  CTRUN_RETURN_IF_ERROR(CheckPositive("close_timeout", p.close_timeout));
  CTRUN_RETURN_IF_ERROR(CheckPositive("keep_alive_interval", p.keep_alive_interval));
  if (p.keep_alive_max_attempt < 1) {
    return Status::InvalidArgument("--rdzv-conf keep_alive_max_attempt=" +
                                   std::to_string(p.keep_alive_max_attempt) +
                                   ": must be at least 1 (missed keep-alives before a node is evicted)");
  }
  if (p.max_unhealthy_nodes < -1) {
    return Status::InvalidArgument("--max-unhealthy-nodes " + std::to_string(p.max_unhealthy_nodes) +
                                   ": must not be negative (give a number of nodes >= 0)");
  }
  return Status::Ok();
}

}  // namespace ctrun::rdzv
