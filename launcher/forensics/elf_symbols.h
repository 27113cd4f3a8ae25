// Symbols of an ELF file on disk: where a shared library or executable puts
// a global (e.g. CPython's _PyRuntime) before it is loaded, and how to find
// its load address in a process. 64-bit little-endian ELF only.
// Every offset read from the file is bounds-checked: a truncated or
// hostile file gives an error, never a read outside it. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/result.h"

namespace ctrun::launcher {

struct ElfSymbols {
  // ET_DYN (a shared library or a position-independent executable): loaded
  // at a bias; ET_EXEC: at the addresses in the file.
  bool relocatable = true;
  // The lowest PT_LOAD segment's virtual address and file offset.
  uint64_t first_load_vaddr = 0;
  uint64_t first_load_offset = 0;
  // The value (st_value) of each symbol asked for that the file defines,
  // from .dynsym or, when the file has one, .symtab.
  std::map<std::string, uint64_t> values;
};

// Reads `path`'s program headers and its symbol tables, looking for `names`.
// IOError when the file cannot be read; InvalidArgument when it is not a
// 64-bit little-endian ELF file or its tables lie outside it.
Result<ElfSymbols> ReadElfSymbols(const std::string& path, const std::vector<std::string>& names);

// The address at which a symbol of value `value` lives in a process that
// mapped the file's offset `map_offset` at `map_start` (a line of
// /proc/PID/maps for that file).
uint64_t LoadedAddress(const ElfSymbols& elf, uint64_t value, uint64_t map_start, uint64_t map_offset);

}  // namespace ctrun::launcher
