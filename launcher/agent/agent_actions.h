// The AgentMachine's action builders (agent_machine.h): private to the
// machine's .cc files.
#pragma once

#include <chrono>
#include <string>

#include "launcher/agent/agent_machine.h"

namespace ctrun::launcher::agent_actions {

using Json = nlohmann::ordered_json;

inline double SecondsOf(Duration d) { return std::chrono::duration<double>(d).count(); }

inline AgentAction Do(AgentAction::Kind kind) {
  AgentAction a;
  a.kind = kind;
  return a;
}

inline AgentAction Log(AgentAction::Level level, std::string text) {
  AgentAction a;
  a.kind = AgentAction::Kind::kLog;
  a.level = level;
  a.text = std::move(text);
  return a;
}

inline AgentAction Emit(std::string name, Json fields) {
  AgentAction a;
  a.kind = AgentAction::Kind::kEmit;
  a.text = std::move(name);
  a.fields = std::move(fields);
  return a;
}

inline AgentAction ArmTimer(AgentTimer timer, Duration delay) {
  AgentAction a;
  a.kind = AgentAction::Kind::kArmTimer;
  a.timer = timer;
  a.grace = delay;
  return a;
}

inline AgentAction CancelTimer(AgentTimer timer) {
  AgentAction a;
  a.kind = AgentAction::Kind::kCancelTimer;
  a.timer = timer;
  return a;
}

}  // namespace ctrun::launcher::agent_actions
