// The one line of a libtorch exception worth showing a user: c10::Error's
// message without its C++ backtrace, cut at the first newline.
#pragma once

#include <exception>
#include <string>

namespace ctrun::trainer {

std::string TorchErrorLine(const std::exception& error);

}  // namespace ctrun::trainer
