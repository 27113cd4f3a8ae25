#include "launcher/cli/hostlist.h"

#include <cctype>
#include <charconv>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "launcher/cli/text.h"

namespace ctrun::launcher {
namespace {

constexpr std::string_view kFix = "(write host lists as Slurm does, e.g. n[1-3,5] or gpu[01-02],cpu7)";

Status Bad(std::string what) { return Status::InvalidArgument(fmt::format("{} {}", what, kFix)); }

bool IsSeparator(char c) { return c == ',' || std::isspace(static_cast<unsigned char>(c)); }

// One bracket group or literal text; a literal is a group of one.
using Choices = std::vector<std::string>;

Result<uint64_t> ParseBound(std::string_view text, std::string_view item) {
  uint64_t v = 0;
  bool digits = !text.empty() && text.size() <= 18;
  for (char c : text) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (!digits) return Bad(fmt::format("'{}' is not a number or LO-HI range", QuotePart(item)));
  std::from_chars(text.data(), text.data() + text.size(), v);
  return v;
}

// "1-3,05" -> 1 2 3 05. `budget` is the most names the caller can still take.
Result<Choices> ExpandGroup(std::string_view group, size_t budget) {
  Choices out;
  size_t start = 0;
  for (size_t i = 0; i <= group.size(); ++i) {
    if (i < group.size() && group[i] != ',') continue;
    std::string_view item = group.substr(start, i - start);
    start = i + 1;
    if (item.empty()) return Bad(fmt::format("empty item in '[{}]'", QuotePart(group)));
    size_t dash = item.find('-');
    std::string_view lo_text = item.substr(0, dash);
    std::string_view hi_text = dash == std::string_view::npos ? lo_text : item.substr(dash + 1);
    auto lo = ParseBound(lo_text, item);
    if (!lo.ok()) return lo.status();
    auto hi = ParseBound(hi_text, item);
    if (!hi.ok()) return hi.status();
    if (*lo > *hi) return Bad(fmt::format("range '{}' runs backwards", QuotePart(item)));
    if (*hi - *lo >= budget - out.size()) {
      return Bad(fmt::format("range '{}' names more than {} hosts", QuotePart(item), kMaxHostlistHosts));
    }
    // Slurm pads to the width LO is written with: [01-10] gives 01..10, [1-10] 1..10.
    const size_t width = lo_text.size();
    for (uint64_t n = *lo; n <= *hi; ++n) out.push_back(fmt::format("{:0{}}", n, width));
  }
  return out;
}

// Splits one host expression ("r[1-2]n[01-02]") into literal and group parts.
Result<std::vector<Choices>> ParseHost(std::string_view host) {
  std::vector<Choices> parts;
  size_t i = 0;
  while (i < host.size()) {
    if (host[i] == ']') return Bad(fmt::format("']' without '[' in '{}'", QuotePart(host)));
    if (host[i] != '[') {
      size_t end = host.find_first_of("[]", i);
      if (end == std::string_view::npos) end = host.size();
      for (size_t j = i; j < end; ++j) {
        char c = host[j];
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') {
          return Bad(fmt::format("'{}' is not a host name character in '{}'", QuotePart(std::string_view(&c, 1)),
                                 QuotePart(host)));
        }
      }
      parts.push_back({std::string(host.substr(i, end - i))});
      i = end;
      continue;
    }
    size_t close = host.find(']', i);
    size_t nested = host.find('[', i + 1);
    if (close == std::string_view::npos) return Bad(fmt::format("'[' without ']' in '{}'", QuotePart(host)));
    if (nested < close) return Bad(fmt::format("nested '[' in '{}'", QuotePart(host)));
    std::string_view group = host.substr(i + 1, close - i - 1);
    if (group.empty()) return Bad(fmt::format("empty brackets in '{}'", QuotePart(host)));
    auto choices = ExpandGroup(group, kMaxHostlistHosts + 1);
    if (!choices.ok()) return choices.status();
    parts.push_back(std::move(*choices));
    i = close + 1;
  }
  return parts;
}

// Top-level host expressions: separators inside brackets do not split.
Result<std::vector<std::string_view>> SplitHosts(std::string_view list) {
  std::vector<std::string_view> hosts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size()) {
      if (list[i] == '[') ++depth;
      if (list[i] == ']') --depth;
      if (depth > 0 || !IsSeparator(list[i])) continue;
    }
    std::string_view host = list.substr(start, i - start);
    start = i + 1;
    if (!host.empty()) {
      hosts.push_back(host);
    } else if (i < list.size() && list[i] == ',') {
      return Bad(fmt::format("empty host name in '{}'", QuotePart(list)));
    }
  }
  if (depth != 0) return Bad(fmt::format("unbalanced brackets in '{}'", QuotePart(list)));
  if (hosts.empty()) return Bad("the host list is empty");
  return hosts;
}

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(std::string_view hostlist) {
  auto hosts = SplitHosts(hostlist);
  if (!hosts.ok()) return hosts.status();
  std::vector<std::string> out;
  for (std::string_view host : *hosts) {
    auto parts = ParseHost(host);
    if (!parts.ok()) return parts.status();
    size_t count = 1;
    for (const Choices& c : *parts) {
      if (c.size() > (kMaxHostlistHosts - out.size()) / count) {
        return Bad(fmt::format("'{}' names more than {} hosts", QuotePart(hostlist), kMaxHostlistHosts));
      }
      count *= c.size();
    }
    // Odometer over the parts, the last one turning fastest.
    std::vector<size_t> index(parts->size(), 0);
    for (size_t n = 0; n < count; ++n) {
      std::string name;
      for (size_t p = 0; p < parts->size(); ++p) name += (*parts)[p][index[p]];
      out.push_back(std::move(name));
      for (size_t p = parts->size(); p-- > 0;) {
        if (++index[p] < (*parts)[p].size()) break;
        index[p] = 0;
      }
    }
  }
  return out;
}

Result<std::string> FirstHost(std::string_view hostlist) {
  auto hosts = ExpandHostlist(hostlist);
  if (!hosts.ok()) return hosts.status();
  return std::move(hosts->front());
}

}  // namespace ctrun::launcher
