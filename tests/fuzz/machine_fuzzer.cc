// libFuzzer target: the rendezvous state machine alone, over event sequences
// decoded from the input: a few bytes of Params, then events among 8 nodes
// (two incarnations each) and clock steps, at most 128 per input. Checks: no crash, no sanitizer
// report, the invariants of fuzz_checks.h after every Step, and (on one
// input in eight) that the same sequence replayed gives the same decisions.
#include <cstddef>
#include <cstdint>

#include "fuzz_checks.h"
#include "fuzz_input.h"

namespace ctrun::fuzz {
namespace {

using namespace std::chrono_literals;

rdzv::Params DecodeParams(FuzzInput& in) {
  rdzv::Params p;
  p.min_nodes = 1 + in.Byte() % 4;
  p.max_nodes = p.min_nodes + in.Byte() % 4;
  p.join_timeout = std::chrono::milliseconds(100 + 50 * (in.Byte() % 40));
  p.last_call_timeout = std::chrono::milliseconds(1 + 10 * (in.Byte() % 50));
  p.close_timeout = std::chrono::milliseconds(100 + 50 * (in.Byte() % 20));
  p.keep_alive_interval = std::chrono::milliseconds(50 + 10 * (in.Byte() % 20));
  p.keep_alive_max_attempt = 1 + in.Byte() % 4;
  return p;
}

struct Timed {
  rdzv::Event event;
  ctrun::TimePoint now;
};

std::vector<Timed> DecodeEvents(FuzzInput& in) {
  std::vector<Timed> events;
  ctrun::TimePoint now = ctrun::TimePoint{} + 1h;
  while (!in.done() && events.size() < 128) {
    const uint8_t op = in.Byte();
    const uint8_t arg = in.Byte();
    rdzv::NodeId node{"host" + std::to_string(arg % 8), 100 + arg % 8, 0};
    const uint64_t incarnation = (arg >> 3) & 1;
    switch (op % 6) {
      case 0: {
        rdzv::Join j;
        j.node = node;
        j.incarnation = incarnation;
        j.local_world_size = (arg >> 4) % 5;  // 0 is invalid and must be rejected
        if (op & 0x80) j.hint_rank = (op >> 3) % 8;
        j.addr = "10.0.0." + std::to_string(arg % 8);
        j.master_port = 29500 + arg % 8;
        events.push_back({j, now});
        break;
      }
      case 1:
        events.push_back({rdzv::KeepAlive{node, incarnation}, now});
        break;
      case 2:
        events.push_back({rdzv::Leave{node, incarnation, static_cast<rdzv::LeaveReason>((arg >> 4) % 3)}, now});
        break;
      case 3:
        if ((op >> 3) % 4 == 0) events.push_back({rdzv::Close{}, now});
        break;
      default:
        now += std::chrono::milliseconds(5 * arg);
        events.push_back({rdzv::Tick{}, now});
        break;
    }
  }
  return events;
}

std::vector<std::vector<rdzv::Decision>> Run(const rdzv::Params& params, const std::vector<Timed>& events) {
  Result<rdzv::RendezvousMachine> machine = rdzv::RendezvousMachine::Create(params);
  Require(machine.ok());
  std::vector<std::vector<rdzv::Decision>> all;
  for (const Timed& t : events) {
    all.push_back(machine->Step(t.event, t.now));
    CheckStep(*machine, all.back(), t.now);
  }
  return all;
}

}  // namespace
}  // namespace ctrun::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ctrun::fuzz;
  FuzzInput in(data, size);
  const ctrun::rdzv::Params params = DecodeParams(in);
  const std::vector<Timed> events = DecodeEvents(in);
  // Determinism costs a second run: checked on one input in eight.
  if (size > 0 && data[0] % 8 == 0) {
    Require(Run(params, events) == Run(params, events));
  } else {
    Run(params, events);
  }
  return 0;
}
