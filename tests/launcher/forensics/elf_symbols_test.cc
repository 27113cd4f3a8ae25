// ELF symbols from real files: this machine's python3.11 (which defines
// _PyRuntime and Py_Version), a file that is not ELF, a cut-off copy, and
// the load-address arithmetic for a position-independent file.
#include "launcher/forensics/elf_symbols.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace ctrun::launcher {
namespace {

const char* const kElfPython = "/usr/bin/python3.11";

std::string TempFile(const std::string& bytes) {
  char path[] = "/tmp/ctrun_elf_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  ::close(fd);
  return path;
}

TEST_CASE("python3.11 defines _PyRuntime and Py_Version; a name it lacks is absent") {
  Result<ElfSymbols> elf = ReadElfSymbols(kElfPython, {"_PyRuntime", "Py_Version", "no_such_symbol_anywhere"});
  REQUIRE(elf.ok());
  CHECK_FALSE(elf->relocatable);  // Debian builds it at fixed addresses (ET_EXEC)
  CHECK(elf->values.count("_PyRuntime") == 1);
  CHECK(elf->values.count("Py_Version") == 1);
  CHECK(elf->values.count("no_such_symbol_anywhere") == 0);
  CHECK(elf->values.at("_PyRuntime") != 0);
}

TEST_CASE("a missing file, a file that is not ELF and a cut-off ELF file are errors") {
  CHECK(ReadElfSymbols("/nonexistent/python3", {"_PyRuntime"}).status().code() == Status::Code::kIOError);
  const std::string text = TempFile("#!/bin/sh\necho not an ELF file\n");
  CHECK(ReadElfSymbols(text, {"_PyRuntime"}).status().code() == Status::Code::kInvalidArgument);
  ::unlink(text.c_str());

  std::ifstream in(kElfPython, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  const std::string cut = TempFile(head);  // the headers point past the end
  Result<ElfSymbols> r = ReadElfSymbols(cut, {"_PyRuntime"});
  CHECK(r.status().code() == Status::Code::kInvalidArgument);
  ::unlink(cut.c_str());
}

TEST_CASE("a relocatable file's symbol lives at its first page's mapping plus its value") {
  ElfSymbols pie;
  pie.relocatable = true;
  pie.first_load_vaddr = 0;
  pie.first_load_offset = 0;
  CHECK(LoadedAddress(pie, 0x5000, 0x7f0000000000, 0) == 0x7f0000005000);
  ElfSymbols prelinked = pie;
  prelinked.first_load_vaddr = 0x400000;
  CHECK(LoadedAddress(prelinked, 0x401000, 0x7f0000000000, 0) == 0x7f0000001000);
  ElfSymbols exec = pie;
  exec.relocatable = false;
  CHECK(LoadedAddress(exec, 0x401000, 0x400000, 0) == 0x401000);
}

}  // namespace
}  // namespace ctrun::launcher
