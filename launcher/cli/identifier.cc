#include "launcher/cli/identifier.h"

#include <fmt/format.h>

#include "launcher/cli/text.h"

namespace ctrun::launcher {
namespace {

// The first byte of `v` that does not start a well-formed UTF-8 character,
// and the first that starts a control character; v.size() for none.
struct Scan {
  size_t not_utf8;
  size_t control;
};

Scan ScanText(std::string_view v) {
  Scan scan{v.size(), v.size()};
  for (size_t i = 0; i < v.size();) {
    char32_t cp = 0;
    const size_t len = DecodeUtf8(v.substr(i), cp);
    if (len == 0) {
      scan.not_utf8 = i;
      return scan;
    }
    if (IsControl(cp) && scan.control == v.size()) scan.control = i;
    i += len;
  }
  return scan;
}

}  // namespace

Status CheckRunId(std::string_view v) {
  if (v.empty()) return Status::InvalidArgument("run id must not be empty (e.g. --rdzv-id job42)");
  if (v.size() > kMaxRunIdBytes) {
    return Status::InvalidArgument(fmt::format(
        "a run id is at most {} bytes, this one has {} (give a shorter id, e.g. --rdzv-id job42)", kMaxRunIdBytes,
        v.size()));
  }
  const Scan scan = ScanText(v);
  if (scan.not_utf8 < v.size()) {
    return Status::InvalidArgument(fmt::format(
        "a run id must be UTF-8 text, byte {} is not (give an id of letters, digits, '-', '_' and '.', "
        "e.g. --rdzv-id job42)",
        scan.not_utf8));
  }
  if (scan.control < v.size()) {
    return Status::InvalidArgument(fmt::format(
        "a run id must not hold control characters, byte {} is one (give an id of letters, digits, '-', '_' "
        "and '.', e.g. --rdzv-id job42)",
        scan.control));
  }
  return Status::Ok();
}

Status CheckNodeName(std::string_view v) {
  if (v.size() > kMaxNodeNameBytes) {
    return Status::InvalidArgument(fmt::format(
        "a node name is at most {} bytes, this one has {} (give this node's host name or IP address, e.g. "
        "--local-addr 10.0.0.5)",
        kMaxNodeNameBytes, v.size()));
  }
  const Scan scan = ScanText(v);
  if (scan.not_utf8 < v.size()) {
    return Status::InvalidArgument(fmt::format(
        "a node name must be UTF-8 text, byte {} is not (give this node's host name or IP address, e.g. "
        "--local-addr 10.0.0.5)",
        scan.not_utf8));
  }
  if (scan.control < v.size()) {
    return Status::InvalidArgument(fmt::format(
        "a node name must not hold control characters, byte {} is one (give this node's host name or IP "
        "address, e.g. --local-addr 10.0.0.5)",
        scan.control));
  }
  return Status::Ok();
}

}  // namespace ctrun::launcher
