#include "launcher/numa/hwloc_loader.h"

#include <string>

#include <catch2/catch.hpp>

namespace ctrun::launcher {
namespace {

using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;

TEST_CASE("hwloc's library is opened at run time, with the headers' major API version") {
  REQUIRE(LoadHwloc().ok());
  // Through the trampoline: the library's own answer, not the headers'.
  CHECK((hwloc_get_api_version() >> 16) == (HWLOC_API_VERSION >> 16));
  CHECK(ProbeHwlocLibrary(kHwlocLibrary).ok());
}

TEST_CASE("A missing hwloc library: the library, the reason and the package to install") {
  const Status s = ProbeHwlocLibrary("libctrun-test-absent-hwloc.so.15");
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == Status::Code::kFailedPrecondition);
  CHECK_THAT(s.message(), StartsWith("hwloc's library libctrun-test-absent-hwloc.so.15 cannot be "
                                      "loaded, install it (Debian/Ubuntu: apt-get install "
                                      "libhwloc15): "));
  CHECK_THAT(s.message(), EndsWith("No such file or directory"));
  CHECK(s.message().find('\n') == std::string::npos);
}

TEST_CASE("A library that is not hwloc names the first function it lacks") {
  const Status s = ProbeHwlocLibrary("libm.so.6");
  REQUIRE_FALSE(s.ok());
  CHECK(s.message() ==
        "the library libm.so.6 is not hwloc 2.x, reinstall it (Debian/Ubuntu: apt-get install "
        "--reinstall libhwloc15): it lacks hwloc_get_api_version");
}

}  // namespace
}  // namespace ctrun::launcher
