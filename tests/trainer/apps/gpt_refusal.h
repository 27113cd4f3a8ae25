// Refusal(args): the message ctrun-gpt's flag parser refuses `args` with
// (InvalidArgument), or "" when it accepts them. Shared by the gpt flag tests.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "trainer/apps/gpt_flags.h"

namespace ctrun::trainer::testing {

inline std::string Refusal(const std::vector<std::string>& args) {
  auto flags = ParseGptFlags(args);
  if (flags.ok()) return "";
  CHECK(flags.status().IsInvalidArgument());
  return flags.status().message();
}

}  // namespace ctrun::trainer::testing
