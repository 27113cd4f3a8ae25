#include "trainer/comm/torch_error.h"

#include <c10/util/Exception.h>

namespace ctrun::trainer {

std::string TorchErrorLine(const std::exception& error) {
  std::string text = error.what();
  if (auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    text = c10_error->what_without_backtrace();
  }
  auto newline = text.find('\n');
  return newline == std::string::npos ? text : text.substr(0, newline);
}

}  // namespace ctrun::trainer
