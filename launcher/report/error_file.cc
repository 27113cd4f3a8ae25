#include "launcher/report/error_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace ctrun::launcher {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kShapeHint[] =
    "(expected {\"message\":{\"message\":...,\"extraInfo\":{\"py_callstack\":...,"
    "\"timestamp\":\"<epoch s>\"}}} or {\"message\":\"...\",\"timestamp\":<epoch s>})";

Status Malformed(const std::string& what) {
  return Status::InvalidArgument("error file: " + what + " " + kShapeHint);
}

// Python's int() applied to a JSON value: an integer, a float (truncated) or a
// string holding a decimal integer with optional sign and surrounding blanks.
std::optional<int64_t> ToEpochSeconds(const Json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) return static_cast<int64_t>(v.get<double>());
  if (!v.is_string()) return std::nullopt;
  const std::string& s = v.get_ref<const std::string&>();
  size_t b = s.find_first_not_of(" \t\n\r");
  size_t e = s.find_last_not_of(" \t\n\r");
  if (b == std::string::npos) return std::nullopt;
  if (s[b] == '+') ++b;
  int64_t out = 0;
  auto [ptr, ec] = std::from_chars(s.data() + b, s.data() + e + 1, out);
  if (ec != std::errc() || ptr != s.data() + e + 1) return std::nullopt;
  return out;
}

Result<ErrorFileData> ParseStructured(const Json& message) {
  ErrorFileData data;
  data.form = ErrorFileForm::kStructured;
  if (auto it = message.find("message"); it != message.end()) {
    if (!it->is_string()) return Malformed("\"message.message\" must be a string");
    data.message = it->get<std::string>();
  }
  auto extra = message.find("extraInfo");
  if (extra == message.end()) return Malformed("\"message.extraInfo\" is missing");
  if (!extra->is_object()) return Malformed("\"message.extraInfo\" must be an object");
  if (auto it = extra->find("py_callstack"); it != extra->end()) {
    if (!it->is_string()) {
      return Malformed("\"message.extraInfo.py_callstack\" must be a string");
    }
    data.traceback = it->get<std::string>();
  }
  auto ts = extra->find("timestamp");
  if (ts == extra->end()) return Malformed("\"message.extraInfo.timestamp\" is missing");
  data.timestamp = ToEpochSeconds(*ts);
  if (!data.timestamp) {
    return Malformed("\"message.extraInfo.timestamp\" " + ts->dump() +
                     " is not an integer number of seconds");
  }
  return data;
}

Result<ErrorFileData> ParseFlat(const Json& root) {
  ErrorFileData data;
  data.form = ErrorFileForm::kFlat;
  data.message = root["message"].get<std::string>();
  if (auto ts = root.find("timestamp"); ts != root.end()) {
    data.timestamp = ToEpochSeconds(*ts);
    if (!data.timestamp) {
      return Malformed("\"timestamp\" " + ts->dump() + " is not an integer number of seconds");
    }
  }
  return data;
}

std::string Errno(int err) { return std::strerror(err); }

}  // namespace

Result<ErrorFileData> ParseErrorFile(std::string_view text) {
  Json root;
  try {
    root = Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return Malformed("is not valid JSON (byte " + std::to_string(e.byte) + ")");
  }
  if (!root.is_object()) return Malformed("top level must be a JSON object");
  auto message = root.find("message");
  if (message == root.end()) return Malformed("field \"message\" is missing");
  Result<ErrorFileData> data = Status::Internal("unreachable");
  if (message->is_object()) {
    data = ParseStructured(*message);
  } else if (message->is_string()) {
    data = ParseFlat(root);
  } else {
    return Malformed("field \"message\" must be a string or an object");
  }
  if (data.ok()) data->raw_json = std::string(text);
  return data;
}

Result<ErrorFileData> ReadErrorFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Status::NotFound("error file " + path + " does not exist (the worker wrote none)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("error file " + path + ": cannot open: " + Errno(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::IOError("error file " + path + ": read failed");
  Result<ErrorFileData> data = ParseErrorFile(text.str());
  if (!data.ok()) {
    // "error file: ..." -> "error file <path>: ..."
    std::string msg = data.status().message();
    msg.insert(std::string("error file").size(), " " + path);
    return Status::InvalidArgument(msg);
  }
  return data;
}

Status WriteAgentErrorFile(const std::string& path, const ErrorFileData& root_cause,
                           int exit_code) {
  Json out;
  if (!root_cause.raw_json.empty()) {
    try {
      out = Json::parse(root_cause.raw_json);
    } catch (const Json::parse_error& e) {
      return Status::InvalidArgument("root cause error file JSON is not valid JSON (byte " +
                                     std::to_string(e.byte) + "); pass data from ReadErrorFile");
    }
    auto message = out.find("message");
    if (exit_code != 0 && message != out.end() && message->is_object()) {
      (*message)["errorCode"] = exit_code;
    }
  } else {
    int64_t ts = root_cause.timestamp ? *root_cause.timestamp
                                      : static_cast<int64_t>(std::time(nullptr));
    Json extra = Json::object();
    if (!root_cause.traceback.empty()) extra["py_callstack"] = root_cause.traceback;
    extra["timestamp"] = std::to_string(ts);
    Json message = Json::object();
    message["message"] = root_cause.message;
    message["extraInfo"] = std::move(extra);
    if (exit_code != 0) message["errorCode"] = exit_code;
    out["message"] = std::move(message);
  }
  // Invalid UTF-8 from a worker must not make the agent's report fail.
  const std::string text = out.dump(-1, ' ', false, Json::error_handler_t::replace);

  std::string tmp = path + ".XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    return Status::IOError("agent error file " + path + ": cannot create a temporary file "
                           "beside it: " + Errno(errno) + " (check the directory exists and is writable)");
  }
  auto fail = [&](const std::string& what) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Status::IOError("agent error file " + path + ": " + what + ": " + Errno(err));
  };
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("write failed");
    done += static_cast<size_t>(n);
  }
  // mkstemp creates 0600; torch's open("w") gives the usual 0644 (before umask).
  if (::fchmod(fd, 0644) != 0) return fail("chmod failed");
  if (::fsync(fd) != 0) return fail("fsync failed");
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Status::IOError("agent error file " + path + ": close failed: " + Errno(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Status::IOError("agent error file " + path + ": rename failed: " + Errno(err));
  }
  return Status::Ok();
}

}  // namespace ctrun::launcher
