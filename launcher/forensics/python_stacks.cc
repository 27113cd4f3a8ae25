#include "launcher/forensics/python_stacks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>
#include <unistd.h>

#include "launcher/forensics/elf_symbols.h"
#include "launcher/forensics/process_memory.h"
#include "launcher/forensics/python_layout.h"
#include "launcher/forensics/python_linetable.h"

namespace ctrun::launcher {

namespace {

constexpr int kMaxInterpreters = 16;
constexpr int64_t kMaxNameChars = 4096;          // a file or function name
constexpr int64_t kMaxLineTableBytes = 1 << 20;  // a code object's line table
constexpr size_t kMaxCodeObjects = 4096;         // cached per read

std::string_view Basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// "python3.11", "libpython3.11.so.1.0", "python3.12d" -> {3, 11}; nullopt
// for a name that is not a CPython's.
std::optional<std::pair<int, int>> VersionFromName(std::string_view name) {
  for (std::string_view prefix : {"libpython", "python"}) {
    if (name.substr(0, prefix.size()) != prefix) continue;
    name.remove_prefix(prefix.size());
    int major = 0, minor = 0;
    size_t i = 0;
    while (i < name.size() && name[i] >= '0' && name[i] <= '9') major = major * 10 + (name[i++] - '0');
    if (i == 0 || i >= name.size() || name[i] != '.') return std::nullopt;
    const size_t m = ++i;
    while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i - m < 3) minor = minor * 10 + (name[i++] - '0');
    if (i == m) return std::nullopt;
    return std::make_pair(major, minor);
  }
  return std::nullopt;
}

bool LooksLikePython(std::string_view path) {
  const std::string_view b = Basename(path);
  return b.substr(0, 9) == "libpython" || b.substr(0, 6) == "python";
}

// Where the process's CPython runtime lives.
struct Runtime {
  uint64_t py_runtime = 0;
  uint64_t py_version = 0;    // the address of Py_Version; 0 = none
  uint64_t py_code_type = 0;  // the address of PyCode_Type; 0 = none
  std::string file;
};

Result<Runtime> FindRuntime(pid_t pid, const std::vector<Mapping>& maps) {
  std::vector<std::string> files;
  for (const Mapping& m : maps) {
    if (m.path.empty() || m.path[0] != '/' || !LooksLikePython(m.path)) continue;
    if (std::find(files.begin(), files.end(), m.path) == files.end()) files.push_back(m.path);
  }
  // libpython first: a python binary linked against it has no runtime of its own.
  std::stable_sort(files.begin(), files.end(), [](const std::string& a, const std::string& b) {
    return (Basename(a).substr(0, 3) == "lib") > (Basename(b).substr(0, 3) == "lib");
  });
  std::string last_error;
  for (const std::string& path : files) {
    // The file as the process sees it (it may run in another mount namespace).
    Result<ElfSymbols> elf =
        ReadElfSymbols("/proc/" + std::to_string(pid) + "/root" + path, {"_PyRuntime", "Py_Version", "PyCode_Type"});
    if (!elf.ok()) elf = ReadElfSymbols(path, {"_PyRuntime", "Py_Version", "PyCode_Type"});
    if (!elf.ok()) {
      last_error = elf.status().message();
      continue;
    }
    auto rt = elf->values.find("_PyRuntime");
    if (rt == elf->values.end()) continue;
    // The mapping of the file's first page holds the load bias.
    const uint64_t first_page = elf->first_load_offset & ~uint64_t{4095};
    const Mapping* base = nullptr;
    for (const Mapping& m : maps) {
      if (m.path == path && m.offset == first_page && (base == nullptr || m.start < base->start)) base = &m;
    }
    if (base == nullptr) continue;
    Runtime r;
    r.file = path;
    r.py_runtime = LoadedAddress(*elf, rt->second, base->start, base->offset);
    if (auto v = elf->values.find("Py_Version"); v != elf->values.end()) {
      r.py_version = LoadedAddress(*elf, v->second, base->start, base->offset);
    }
    if (auto c = elf->values.find("PyCode_Type"); c != elf->values.end()) {
      r.py_code_type = LoadedAddress(*elf, c->second, base->start, base->offset);
    }
    return r;
  }
  if (!last_error.empty()) return Status::IOError("cannot read the Python binary: " + last_error);
  return Status::NotFound("no CPython in the process");
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x110000) {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += '?';
  }
}

class Walker {
 public:
  Walker(pid_t pid, const PythonLayout& l, uint64_t code_type) : mem_(pid), l_(l), code_type_(code_type) {}

  std::optional<uint64_t> Ptr(uint64_t addr) const { return mem_.Value<uint64_t>(addr); }

  // A compact str object's text as UTF-8; "?" when it cannot be read.
  std::string Str(uint64_t obj) const {
    const auto length = mem_.Value<int64_t>(obj + l_.unicode_length);
    const auto state = mem_.Value<uint32_t>(obj + l_.unicode_state);
    if (!length || !state || *length < 0) return "?";
    const uint32_t kind = (*state >> 2) & 7;
    const bool compact = (*state >> 5) & 1;
    const bool ascii = (*state >> 6) & 1;
    if (!compact || (kind != 1 && kind != 2 && kind != 4)) return "?";
    const int64_t n = std::min(*length, kMaxNameChars);
    std::string raw(static_cast<size_t>(n) * kind, '\0');
    if (!mem_.Read(obj + (ascii ? l_.unicode_ascii_data : l_.unicode_compact_data), raw.data(), raw.size())) {
      return "?";
    }
    std::string out;
    for (int64_t i = 0; i < n; ++i) {
      uint32_t cp = 0;
      std::memcpy(&cp, raw.data() + i * kind, kind);  // little-endian
      AppendUtf8(out, cp);
    }
    if (n < *length) out += "...";
    return out;
  }

  std::string Bytes(uint64_t obj) const {
    const auto size = mem_.Value<int64_t>(obj + l_.bytes_size);
    if (!size || *size < 0 || *size > kMaxLineTableBytes) return "";
    std::string out(static_cast<size_t>(*size), '\0');
    if (!mem_.Read(obj + l_.bytes_data, out.data(), out.size())) return "";
    return out;
  }

  struct Code {
    std::string file, function, table;
    int first_line = 0;
  };

  // The code object at `addr`, read once per walk; null when it is not one.
  const Code* CodeAt(uint64_t addr) {
    if (auto it = code_.find(addr); it != code_.end()) return &it->second;
    if (code_type_ != 0) {
      const auto type = Ptr(addr + 8);  // ob_type
      if (!type || *type != code_type_) return nullptr;
    }
    const auto filename = Ptr(addr + l_.code_filename);
    const auto name = Ptr(addr + l_.code_name);
    const auto table = Ptr(addr + l_.code_linetable);
    const auto first = mem_.Value<int32_t>(addr + l_.code_firstlineno);
    if (!filename || !name || !table || !first) return nullptr;
    if (code_.size() >= kMaxCodeObjects) code_.clear();
    Code c{Str(*filename), Str(*name), Bytes(*table), *first};
    return &code_.emplace(addr, std::move(c)).first->second;
  }

  // One frame's description; nullopt when the frame is a shim or not a
  // Python function's (skipped), `*broken` when it cannot be read.
  std::optional<PythonFrameInfo> Frame(uint64_t frame, bool* broken) {
    if (l_.owner_cstack >= 0 || l_.owner_interpreter >= 0) {
      const auto owner = mem_.Value<uint8_t>(frame + l_.frame_owner);
      if (!owner) return *broken = true, std::nullopt;
      if (*owner == l_.owner_cstack || (l_.owner_interpreter >= 0 && *owner == l_.owner_interpreter)) {
        return std::nullopt;  // a shim: no Python code
      }
    }
    const auto raw = Ptr(frame + l_.frame_code);
    if (!raw) return *broken = true, std::nullopt;
    const uint64_t code_addr = *raw & l_.code_pointer_mask;
    if (code_addr == 0) return std::nullopt;
    const Code* code = CodeAt(code_addr);
    if (code == nullptr) return std::nullopt;
    int64_t unit = -1;
    if (l_.chain == FrameChain::kFrameObject) {
      if (const auto lasti = mem_.Value<int32_t>(frame + l_.frame_instr)) unit = *lasti;
    } else if (const auto instr = Ptr(frame + l_.frame_instr)) {
      const uint64_t start = code_addr + l_.code_instructions;
      if (*instr >= start) unit = static_cast<int64_t>((*instr - start) / 2);
    }
    PythonFrameInfo f;
    f.file = code->file;
    f.function = code->function;
    f.line = unit < 0 || unit > (1 << 28)
                 ? -1
                 : LineForInstruction(code->table, l_.line_table, code->first_line, static_cast<int>(unit));
    return f;
  }

  PythonThreadInfo Thread(uint64_t tstate, pid_t pid) {
    PythonThreadInfo t;
    t.thread_id = Ptr(tstate + l_.tstate_thread_id).value_or(0);
    if (l_.tstate_native_thread_id != 0) t.native_id = Ptr(tstate + l_.tstate_native_thread_id).value_or(0);
    t.main = t.native_id == static_cast<uint64_t>(pid);
    std::optional<uint64_t> frame = Ptr(tstate + l_.tstate_frame);
    if (frame && l_.chain == FrameChain::kCFrame) frame = *frame ? Ptr(*frame + l_.cframe_current_frame) : 0;
    if (!frame) {
      t.truncated = true;
      return t;
    }
    uint64_t f = *frame;
    for (int i = 0; f != 0; ++i) {
      if (i >= kMaxPythonFrames) {
        t.truncated = true;
        break;
      }
      bool broken = false;
      if (std::optional<PythonFrameInfo> info = Frame(f, &broken)) t.frames.push_back(std::move(*info));
      const auto prev = broken ? std::nullopt : Ptr(f + l_.frame_previous);
      if (!prev) {
        t.truncated = true;
        break;
      }
      f = *prev;
    }
    return t;
  }

 private:
  ProcessMemory mem_;
  const PythonLayout& l_;
  uint64_t code_type_;
  std::map<uint64_t, Code> code_;
};

}  // namespace

Result<PythonStacks> ReadPythonStacks(pid_t pid) {
  Result<std::vector<Mapping>> maps = ReadMaps(pid);
  if (!maps.ok()) return maps.status();
  Result<Runtime> rt = FindRuntime(pid, *maps);
  if (!rt.ok()) return rt.status();
  ProcessMemory mem(pid);

  std::optional<PythonLayout> layout;
  const std::string head = mem.ReadUpTo(rt->py_runtime, kDebugOffsetsReadSize);
  if (head.empty()) {
    return Status::IOError(fmt::format("cannot read the memory of pid {} (ptrace access refused, or it is gone)", pid));
  }
  if (std::string_view(head).substr(0, kDebugOffsetsCookie.size()) == kDebugOffsetsCookie) {
    layout = LayoutFromDebugOffsets(head);
    if (!layout) {
      uint64_t hex = 0;
      if (head.size() >= 16) std::memcpy(&hex, head.data() + 8, sizeof hex);
      return Status::FailedPrecondition(fmt::format("Python {}.{} ({}): its _Py_DebugOffsets are not known to ctrun",
                                                    VersionMajor(hex), VersionMinor(hex), rt->file));
    }
  } else {
    int major = 0, minor = 0;
    if (rt->py_version != 0) {
      if (const auto hex = mem.Value<uint64_t>(rt->py_version)) {
        major = VersionMajor(*hex);
        minor = VersionMinor(*hex);
      }
    }
    if (major == 0) {
      if (const auto v = VersionFromName(Basename(rt->file))) std::tie(major, minor) = *v;
    }
    layout = KnownLayout(major, minor);
    if (!layout) {
      return Status::FailedPrecondition(
          fmt::format("Python {}.{} ({}): its interpreter's layout is not known to ctrun", major, minor, rt->file));
    }
  }

  PythonStacks out;
  out.major = layout->major;
  out.minor = layout->minor;
  Walker w(pid, *layout, rt->py_code_type);
  std::optional<uint64_t> interp = w.Ptr(rt->py_runtime + layout->runtime_interpreters_head);
  for (int i = 0; interp && *interp != 0 && i < kMaxInterpreters; ++i) {
    std::optional<uint64_t> ts = w.Ptr(*interp + layout->interp_threads_head);
    while (ts && *ts != 0 && static_cast<int>(out.threads.size()) < kMaxPythonThreads) {
      out.threads.push_back(w.Thread(*ts, pid));
      ts = w.Ptr(*ts + layout->tstate_next);
    }
    interp = w.Ptr(*interp + layout->interp_next);
  }
  std::stable_partition(out.threads.begin(), out.threads.end(), [](const PythonThreadInfo& t) { return t.main; });
  return out;
}

std::string FormatPythonStacks(const PythonStacks& stacks) {
  std::string out;
  for (const PythonThreadInfo& t : stacks.threads) {
    if (!out.empty()) out += "\n";
    out += fmt::format("Thread 0x{:016x} (", t.thread_id);
    if (t.native_id != 0) out += fmt::format("LWP {}, ", t.native_id);
    if (t.main) out += "main thread; ";
    out += "most recent call first):\n";
    if (t.frames.empty() && !t.truncated) out += "  <no Python frame>\n";
    for (const PythonFrameInfo& f : t.frames) {
      out += fmt::format("  File \"{}\", line {} in {}\n", f.file, f.line < 0 ? std::string("???") : std::to_string(f.line),
                         f.function);
    }
    if (t.truncated) out += "  ...\n";
  }
  return out;
}

}  // namespace ctrun::launcher
