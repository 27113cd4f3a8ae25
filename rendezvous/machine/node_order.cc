#include "rendezvous/machine/node_order.h"

#include <tuple>

namespace ctrun::rdzv {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Compares two digit runs by value: leading zeros stripped, then a longer
// run is larger, then bytewise. Returns <0, 0 or >0.
int CompareNumbers(std::string_view a, std::string_view b) {
  auto strip = [](std::string_view s) {
    size_t i = 0;
    while (i + 1 < s.size() && s[i] == '0') ++i;
    return s.substr(i);
  };
  std::string_view sa = strip(a), sb = strip(b);
  if (sa.size() != sb.size()) return sa.size() < sb.size() ? -1 : 1;
  return sa.compare(sb);
}

size_t RunEnd(std::string_view s, size_t i) {
  while (i < s.size() && IsDigit(s[i])) ++i;
  return i;
}

}  // namespace

bool NaturalLess(std::string_view a, std::string_view b) {
  // First difference in leading zeros between equal numbers; used only when
  // everything else is equal (see the header's tie rule).
  int zero_tie = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (IsDigit(a[i]) && IsDigit(b[j])) {
      size_t ei = RunEnd(a, i), ej = RunEnd(b, j);
      std::string_view ra = a.substr(i, ei - i), rb = b.substr(j, ej - j);
      int c = CompareNumbers(ra, rb);
      if (c != 0) return c < 0;
      if (zero_tie == 0 && ra.size() != rb.size()) zero_tie = ra.size() < rb.size() ? -1 : 1;
      i = ei;
      j = ej;
      continue;
    }
    // A digit run against a byte compares as '0': digits are contiguous in
    // ASCII, so this agrees with any digit of the run.
    unsigned char ca = IsDigit(a[i]) ? '0' : static_cast<unsigned char>(a[i]);
    unsigned char cb = IsDigit(b[j]) ? '0' : static_cast<unsigned char>(b[j]);
    if (ca != cb) return ca < cb;
    ++i;
    ++j;
  }
  bool a_done = i == a.size(), b_done = j == b.size();
  if (a_done != b_done) return a_done;
  return zero_tie < 0;
}

bool NodeLess(const NodeId& a, const NodeId& b) {
  if (a.addr != b.addr) return NaturalLess(a.addr, b.addr);
  return std::tie(a.pid, a.local_id) < std::tie(b.pid, b.local_id);
}

std::string ToString(const NodeId& node) {
  std::string out = node.addr;
  if (node.pid != 0) out += "#" + std::to_string(node.pid);
  if (node.local_id != 0) out += "." + std::to_string(node.local_id);
  return out;
}

}  // namespace ctrun::rdzv
