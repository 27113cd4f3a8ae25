// Test helper shared by the store's tests: a StoreRequest built in one call.
#ifndef CTRUN_TESTS_RENDEZVOUS_STORE_STORE_REQUEST_H_
#define CTRUN_TESTS_RENDEZVOUS_STORE_STORE_REQUEST_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/store/store_protocol.h"

namespace ctrun::rdzv::testing {

inline StoreRequest Req(StoreOp op, std::vector<std::string> keys = {}, std::vector<std::string> values = {},
                        int64_t number = 0) {
  StoreRequest r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  r.number = number;
  return r;
}

}  // namespace ctrun::rdzv::testing

#endif  // CTRUN_TESTS_RENDEZVOUS_STORE_STORE_REQUEST_H_
