#include "rendezvous/grpc/server/call_check.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "rendezvous/grpc/convert/proto_convert.h"

namespace ctrun::rdzv {
namespace {

constexpr char kTokenMismatch[] =
    "rendezvous token mismatch: this node's token is not the server's (give every node and the server the same "
    "CTRUN_RDZV_TOKEN, or --rdzv-conf token_file / ctrund --token-file)";

// Compares in time independent of where the strings differ.
bool TokenMatches(const std::string& want, const std::string& got) {
  unsigned char diff = want.size() == got.size() ? 0 : 1;
  for (size_t i = 0; i < got.size(); ++i) diff |= static_cast<unsigned char>(got[i] ^ want[i % want.size()]);
  return diff == 0;
}

// `s` cut to 64 bytes with anything but printable ASCII escaped: it came
// from a caller who is not trusted.
std::string Printable(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 64; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
    }
  }
  if (s.size() > 64) out += "...";
  return out;
}

}  // namespace

grpc::Status CallCheck::Check(const grpc::ServerContextBase& context, v1::ProtocolVersion version, const std::string& token,
                              const std::string& run_id) {
  if (!token_.empty() && !TokenMatches(token_, token)) {
    NoteRefusal(context.peer(), run_id, token.empty() ? "no token" : "a wrong token");
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, kTokenMismatch);
  }
  if (version != kProtocolVersion) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "rendezvous protocol version " + std::to_string(static_cast<int>(version)) +
                            ", this server speaks " + std::to_string(static_cast<int>(kProtocolVersion)) +
                            ": use the same ctrun version on every node");
  }
  return grpc::Status::OK;
}

void CallCheck::NoteRefusal(const std::string& peer, const std::string& run_id, const char* what) {
  const auto now = std::chrono::steady_clock::now();
  uint64_t suppressed = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (now < next_log_) {
      ++suppressed_;
      return;
    }
    next_log_ = now + std::chrono::seconds(1);
    suppressed = std::exchange(suppressed_, 0);
  }
  spdlog::warn("refused a call from {} for run '{}': it sent {} (the caller must use this server's "
               "token: CTRUN_RDZV_TOKEN or --rdzv-conf token_file){}",
               Printable(peer), Printable(run_id), what,
               suppressed ? " (" + std::to_string(suppressed) + " more refusals not logged)" : "");
}

}  // namespace ctrun::rdzv
