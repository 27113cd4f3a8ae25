// libFuzzer target: the agent-hosted store's request parsing and table
// (rendezvous/store/store_protocol.h, rendezvous/store/store_state.h) without sockets. The
// input's first byte picks a client (of 4) and how the rest is split into
// reads; every complete request goes to the StoreState as the server sends
// it. Checks: no crash, no sanitizer report; after an error the parser stays
// failed; a parser never buffers more than a request can hold; every wait a
// write released belongs to a client that asked for one.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "fuzz_checks.h"
#include "rendezvous/store/store_protocol.h"
#include "rendezvous/store/store_state.h"

namespace {

using namespace ctrun::rdzv;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  StoreLimits limits;
  limits.max_key_bytes = 256;
  limits.max_value_bytes = 4096;
  limits.max_keys = 16;
  limits.max_request_bytes = 1 << 16;
  StoreParser parsers[4] = {StoreParser(limits), StoreParser(limits), StoreParser(limits),
                            StoreParser(limits)};
  bool failed[4] = {false, false, false, false};
  StoreState state;
  std::set<StoreClientId> waiting;
  const size_t chunk = 1 + data[0] % 17;
  std::string reply;
  std::vector<StoreClientId> woken;
  for (size_t off = 1, i = 0; off < size; off += chunk, ++i) {
    const size_t n = std::min(chunk, size - off);
    const StoreClientId client = (data[off] >> 6) % 4;
    StoreParser& p = parsers[client];
    p.Feed(data + off, n);
    for (;;) {
      auto r = p.Next();
      if (!r.ok()) {
        failed[client] = true;
        ctrun::fuzz::Require(!p.Next().ok());
        break;
      }
      ctrun::fuzz::Require(!failed[client]);
      if (!*r) break;
      if ((*r)->op == StoreOp::kWait) waiting.insert(client);
      reply.clear();
      woken.clear();
      (void)state.Apply(client, **r, reply, woken);
      for (StoreClientId w : woken) ctrun::fuzz::Require(waiting.count(w) == 1);
    }
    ctrun::fuzz::Require(p.buffered() <= limits.max_request_bytes + chunk);
    if (i % 64 == 63) state.Clear();
  }
  return 0;
}
