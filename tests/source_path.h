// Folders of the source tree that a unit test reads (stored error files,
// certificates, topologies).
#pragma once

#include <filesystem>

namespace ctrun::testing {

// `relative` is a path from the test executable's own folder, as CMake passes
// it (ctrun_test_data_dir in tests/CMakeLists.txt): a relative path, not an
// absolute one, so that a clone of the same commits in another folder
// compiles to the same object and hits the compiler cache. Works from any
// working directory.
inline std::filesystem::path FromExeDir(const char* relative) {
  return std::filesystem::canonical("/proc/self/exe").parent_path() / relative;
}

}  // namespace ctrun::testing
