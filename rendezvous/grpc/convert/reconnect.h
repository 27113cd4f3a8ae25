// How a Join says that it re-opens a node's broken stream (the server went
// away and came back, or the connection broke) instead of starting a new
// rendezvous attempt. Carried as gRPC metadata on the Join call
// (kReconnectKey: "joining" or "running"), so protocol v1's messages are
// unchanged and an older server simply ignores it.
//
//  kJoining: the node is waiting for a round. If the run now holds it as a
//    member of the complete round (the round completed while it was cut
//    off), the server answers with that round's rank table; otherwise the
//    Join is an ordinary, idempotent one.
//  kRunning: the node's workers run the round it last received. If the run
//    still holds it as a member, the server answers with the rank table and
//    takes the Join as a keep-alive (the round goes on, no restart);
//    otherwise it answers RestartRequested (the node missed a restart).
#pragma once

#include <optional>
#include <string_view>

namespace ctrun::rdzv {

enum class Reconnect { kNo, kJoining, kRunning };

inline constexpr char kReconnectKey[] = "ctrun-reconnect";

// "joining" / "running"; "" for kNo (no metadata is sent).
inline std::string_view ReconnectValue(Reconnect r) {
  switch (r) {
    case Reconnect::kJoining: return "joining";
    case Reconnect::kRunning: return "running";
    case Reconnect::kNo: break;
  }
  return "";
}

// The inverse of ReconnectValue; kNo for anything else.
inline Reconnect ParseReconnect(std::string_view value) {
  if (value == "joining") return Reconnect::kJoining;
  if (value == "running") return Reconnect::kRunning;
  return Reconnect::kNo;
}

}  // namespace ctrun::rdzv
