#include "trainer/apps/error_file.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>

namespace ctrun::trainer {

std::string JsonEscape(const std::string& message) {
  std::string out;
  for (char c : message) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

void WriteErrorFile(const std::string& message) {
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path == nullptr || *path == '\0') return;
  std::ofstream out(path, std::ios::trunc);
  out << "{\"message\": \"" << JsonEscape(message) << "\", \"timestamp\": "
      << static_cast<long long>(std::time(nullptr)) << "}\n";
}

}  // namespace ctrun::trainer
