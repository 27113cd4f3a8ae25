#include "launcher/forensics/stack_text.h"

#include <optional>
#include <vector>

namespace ctrun::launcher {

namespace {

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// `  File "/job/train.py", line 8 in f` -> "f (/job/train.py:8)"; "" otherwise.
std::string PythonFrame(std::string_view line) {
  line = TrimLeft(line);
  if (!StartsWith(line, "File \"")) return "";
  line.remove_prefix(6);
  const size_t q = line.find("\", line ");
  if (q == std::string_view::npos) return "";
  const std::string_view file = line.substr(0, q);
  std::string_view rest = line.substr(q + 8);
  const size_t in = rest.find(" in ");
  if (in == std::string_view::npos) return "";
  return std::string(rest.substr(in + 4)) + " (" + std::string(file) + ":" +
         std::string(rest.substr(0, in)) + ")";
}

// `#1  0x000055 in f (a=...) at /src/x.c:7` -> {"f", "/src/x.c:7"}.
struct NativeFrame {
  std::string function;
  std::string location;
  std::string_view marker;  // " at " (a source line) or " from " (a library)
};

std::optional<NativeFrame> ParseNativeFrame(std::string_view line) {
  if (!StartsWith(line, "#")) return std::nullopt;
  size_t i = 1;
  while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
  if (i == 1) return std::nullopt;
  line = TrimLeft(line.substr(i));
  if (StartsWith(line, "0x")) {
    const size_t in = line.find(" in ");
    if (in == std::string_view::npos) return std::nullopt;
    line.remove_prefix(in + 4);
  }
  NativeFrame f;
  size_t end = line.find(" (");
  f.function = std::string(line.substr(0, end));
  for (std::string_view marker : {" at ", " from "}) {
    const size_t at = line.rfind(marker);
    if (at != std::string_view::npos && (end == std::string_view::npos || at > end)) {
      f.location = std::string(line.substr(at + marker.size()));
      f.marker = marker;
      break;
    }
  }
  if (f.function.empty()) return std::nullopt;
  return f;
}

bool InCLibrary(const NativeFrame& f) {
  const std::string& l = f.location;
  return l.find("/libc.so") != std::string::npos || StartsWith(l, "../sysdeps/") ||
         StartsWith(l, "./nptl/") || StartsWith(l, "../nptl/");
}

std::string Describe(const NativeFrame& f) {
  return f.location.empty() ? f.function : f.function + std::string(f.marker) + f.location;
}

std::string PythonInnermost(const std::vector<std::string_view>& lines, size_t begin, size_t end) {
  std::string first;
  for (size_t i = begin; i < end; ++i) {
    if (StartsWith(lines[i], "Current thread ") ||
        (StartsWith(lines[i], "Thread ") && lines[i].find("main thread;") != std::string_view::npos)) {
      for (size_t j = i + 1; j < end && !lines[j].empty(); ++j) {
        std::string f = PythonFrame(lines[j]);
        if (!f.empty()) return f;
      }
    }
    if (first.empty()) first = PythonFrame(lines[i]);
  }
  return first;
}

std::string NativeInnermost(const std::vector<std::string_view>& lines, size_t begin) {
  for (size_t i = begin; i < lines.size(); ++i) {
    if (!StartsWith(lines[i], "Thread 1 (")) continue;
    std::optional<NativeFrame> zero;
    for (size_t j = i + 1; j < lines.size() && !lines[j].empty(); ++j) {
      std::optional<NativeFrame> f = ParseNativeFrame(lines[j]);
      if (!f) continue;
      if (!zero) zero = f;
      if (!InCLibrary(*f)) return Describe(*f);
    }
    return zero ? Describe(*zero) : "";
  }
  return "";
}

}  // namespace

std::string ComposeStacks(std::string_view header, std::string_view python,
                          std::string_view gdb_output) {
  std::string out(header);
  out += "\n";
  if (!python.empty()) {
    out += "\n";
    out += kPythonStacksHeading;
    out += "\n";
    out += python;
    if (!python.empty() && python.back() != '\n') out += "\n";
  }
  out += "\n";
  out += kNativeStacksHeading;
  out += "\n";
  std::string_view native = gdb_output;
  if (StartsWith(native, "Thread ")) {
    // starts with the stacks already
  } else if (size_t t = native.find("\nThread "); t != std::string_view::npos) {
    native.remove_prefix(t + 1);
  }
  out += native;
  if (!native.empty() && native.back() != '\n') out += "\n";
  return out;
}

std::string InnermostFrame(std::string_view stacks) {
  const std::vector<std::string_view> lines = Lines(stacks);
  size_t python = lines.size(), native = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i] == kPythonStacksHeading && python == lines.size()) python = i;
    if (lines[i] == kNativeStacksHeading && native == lines.size()) native = i;
  }
  if (python < lines.size()) {
    std::string f = PythonInnermost(lines, python + 1, native > python ? native : lines.size());
    if (!f.empty()) return f;
  }
  return native < lines.size() ? NativeInnermost(lines, native + 1) : "";
}

}  // namespace ctrun::launcher
