#include "launcher/report/error_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/source_path.h"

namespace ctrun::launcher {
namespace {

namespace fs = std::filesystem;

const fs::path kDataDir = ctrun::testing::FromExeDir(CTRUN_REPORT_TEST_DATA);

// A fresh directory under the system temp dir, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "ctrun_error_file_test.XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string File(const std::string& name) const { return (path_ / name).string(); }
  size_t Entries() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(path_), fs::directory_iterator()));
  }

 private:
  fs::path path_;
};

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_CASE("The structured @record form gives message, traceback and timestamp") {
  Result<ErrorFileData> data = ParseErrorFile(
      R"({"message": {"message": "RuntimeError: boom", "extraInfo": )"
      R"({"py_callstack": "Traceback:\n  line 1\n", "timestamp": "1714564800"}}})");
  REQUIRE(data.ok());
  CHECK(data->form == ErrorFileForm::kStructured);
  CHECK(data->message == "RuntimeError: boom");
  CHECK(data->traceback == "Traceback:\n  line 1\n");
  CHECK(data->timestamp == 1714564800);
  CHECK(data->raw_json.find("RuntimeError: boom") != std::string::npos);
}

TEST_CASE("The flat form gives message and an integer timestamp") {
  Result<ErrorFileData> data = ParseErrorFile(R"({"message": "oom", "timestamp": 1714564700})");
  REQUIRE(data.ok());
  CHECK(data->form == ErrorFileForm::kFlat);
  CHECK(data->message == "oom");
  CHECK(data->traceback.empty());
  CHECK(data->timestamp == 1714564700);
}

TEST_CASE("A flat file without a timestamp has none") {
  Result<ErrorFileData> data = ParseErrorFile(R"({"message": "oom"})");
  REQUIRE(data.ok());
  CHECK_FALSE(data->timestamp.has_value());
}

TEST_CASE("Timestamps are read the way Python's int() reads them") {
  auto ts = [](const std::string& value) -> std::optional<int64_t> {
    Result<ErrorFileData> d = ParseErrorFile(
        R"({"message": {"message": "m", "extraInfo": {"timestamp": )" + value + "}}}");
    if (!d.ok()) return std::nullopt;
    return d->timestamp;
  };
  CHECK(ts("\"17\"") == 17);
  CHECK(ts("\" 17 \"") == 17);
  CHECK(ts("\"+17\"") == 17);
  CHECK(ts("17") == 17);
  CHECK(ts("17.9") == 17);
  CHECK_FALSE(ts("\"17.5\"").has_value());
  CHECK_FALSE(ts("\"soon\"").has_value());
  CHECK_FALSE(ts("\"\"").has_value());
  CHECK_FALSE(ts("null").has_value());
  CHECK_FALSE(ts("true").has_value());
}

TEST_CASE("Structured files may lack py_callstack and message.message") {
  Result<ErrorFileData> data =
      ParseErrorFile(R"({"message": {"extraInfo": {"timestamp": "5"}}})");
  REQUIRE(data.ok());
  CHECK(data->message.empty());
  CHECK(data->traceback.empty());
  CHECK(data->timestamp == 5);
}

TEST_CASE("Malformed error files are InvalidArgument naming the problem") {
  struct Case {
    const char* text;
    const char* names;
  };
  const Case cases[] = {
      {"", "not valid JSON"},
      {"{\"message\": ", "not valid JSON"},
      {"[1, 2]", "top level must be a JSON object"},
      {"{}", "\"message\" is missing"},
      {"{\"message\": 3}", "\"message\" must be a string or an object"},
      {"{\"message\": {\"message\": \"m\"}}", "\"message.extraInfo\" is missing"},
      {"{\"message\": {\"extraInfo\": []}}", "\"message.extraInfo\" must be an object"},
      {"{\"message\": {\"extraInfo\": {}}}", "\"message.extraInfo.timestamp\" is missing"},
      {"{\"message\": {\"extraInfo\": {\"timestamp\": \"x\"}}}",
       "\"message.extraInfo.timestamp\" \"x\" is not an integer"},
      {"{\"message\": {\"message\": 1, \"extraInfo\": {\"timestamp\": 1}}}",
       "\"message.message\" must be a string"},
      {"{\"message\": {\"extraInfo\": {\"timestamp\": 1, \"py_callstack\": 2}}}",
       "\"message.extraInfo.py_callstack\" must be a string"},
      {"{\"message\": \"m\", \"timestamp\": \"later\"}", "\"timestamp\" \"later\" is not an integer"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    Result<ErrorFileData> data = ParseErrorFile(c.text);
    REQUIRE_FALSE(data.ok());
    CHECK(data.status().IsInvalidArgument());
    CHECK_THAT(data.status().message(), Catch::Contains(c.names));
  }
}

TEST_CASE("A real torch 1.13 @record file parses") {
  const std::string path = (kDataDir / "record_error.json").string();
  Result<ErrorFileData> data = ReadErrorFile(path);
  REQUIRE(data.ok());
  CHECK(data->form == ErrorFileForm::kStructured);
  CHECK(data->message == "ValueError: loss is nan at step 7");
  CHECK_THAT(data->traceback, Catch::StartsWith("Traceback (most recent call last):\n"));
  CHECK_THAT(data->traceback, Catch::EndsWith("ValueError: loss is nan at step 7\n"));
  CHECK(data->timestamp == 1795315920);
  CHECK(data->raw_json == ReadText(path));
}

TEST_CASE("A missing error file is NotFound, a malformed one names its path") {
  TempDir dir;
  Result<ErrorFileData> missing = ReadErrorFile(dir.File("error.json"));
  CHECK(missing.status().IsNotFound());
  CHECK_THAT(missing.status().message(), Catch::Contains(dir.File("error.json")));

  WriteText(dir.File("bad.json"), "{\"message\": ");
  Result<ErrorFileData> bad = ReadErrorFile(dir.File("bad.json"));
  CHECK(bad.status().IsInvalidArgument());
  CHECK_THAT(bad.status().message(),
             Catch::StartsWith("error file " + dir.File("bad.json") + ": is not valid JSON"));
}

TEST_CASE("A directory where the error file should be counts as no file") {
  TempDir dir;
  fs::create_directory(dir.File("error.json"));
  CHECK(ReadErrorFile(dir.File("error.json")).status().IsNotFound());
}

TEST_CASE("The agent copy adds errorCode to the root cause and replaces an old file") {
  TempDir dir;
  const std::string out = dir.File("agent_error.json");
  WriteText(out, "stale contents");
  Result<ErrorFileData> root = ReadErrorFile((kDataDir / "record_error.json").string());
  REQUIRE(root.ok());

  REQUIRE(WriteAgentErrorFile(out, *root, 1).ok());

  nlohmann::json written = nlohmann::json::parse(ReadText(out));
  nlohmann::json original = nlohmann::json::parse(root->raw_json);
  original["message"]["errorCode"] = 1;
  CHECK(written == original);
  CHECK(dir.Entries() == 1);  // no temporary file left behind
  struct stat st {};
  REQUIRE(::stat(out.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);

  Result<ErrorFileData> reread = ReadErrorFile(out);
  REQUIRE(reread.ok());
  CHECK(reread->message == root->message);
  CHECK(reread->timestamp == root->timestamp);
}

TEST_CASE("The agent copy keeps key order") {
  TempDir dir;
  Result<ErrorFileData> root =
      ParseErrorFile(R"({"message": {"message": "m", "extraInfo": {"timestamp": "5"}}, "z": 1, "a": 2})");
  REQUIRE(root.ok());
  REQUIRE(WriteAgentErrorFile(dir.File("e.json"), *root, -9).ok());
  CHECK(ReadText(dir.File("e.json")) ==
        R"({"message":{"message":"m","extraInfo":{"timestamp":"5"},"errorCode":-9},"z":1,"a":2})");
}

TEST_CASE("Exit code 0 and the flat form get no errorCode, as in torch") {
  TempDir dir;
  Result<ErrorFileData> flat = ParseErrorFile(R"({"message": "oom", "timestamp": 3})");
  REQUIRE(flat.ok());
  REQUIRE(WriteAgentErrorFile(dir.File("flat.json"), *flat, 1).ok());
  CHECK(nlohmann::json::parse(ReadText(dir.File("flat.json"))) ==
        nlohmann::json::parse(flat->raw_json));

  Result<ErrorFileData> structured =
      ParseErrorFile(R"({"message": {"message": "m", "extraInfo": {"timestamp": "5"}}})");
  REQUIRE(structured.ok());
  REQUIRE(WriteAgentErrorFile(dir.File("zero.json"), *structured, 0).ok());
  CHECK_FALSE(nlohmann::json::parse(ReadText(dir.File("zero.json")))["message"].contains("errorCode"));
}

TEST_CASE("Without a worker file the agent writes the structured form itself") {
  TempDir dir;
  ErrorFileData synthesized;
  synthesized.message = "Signal 9 (SIGKILL) received by PID 77";
  synthesized.timestamp = 1714564800;
  REQUIRE(WriteAgentErrorFile(dir.File("e.json"), synthesized, -9).ok());
  CHECK(ReadText(dir.File("e.json")) ==
        R"({"message":{"message":"Signal 9 (SIGKILL) received by PID 77",)"
        R"("extraInfo":{"timestamp":"1714564800"},"errorCode":-9}})");
  Result<ErrorFileData> reread = ReadErrorFile(dir.File("e.json"));
  REQUIRE(reread.ok());
  CHECK(reread->message == synthesized.message);
  CHECK(reread->timestamp == 1714564800);
}

TEST_CASE("A synthesized traceback becomes py_callstack") {
  TempDir dir;
  ErrorFileData synthesized;
  synthesized.message = "m";
  synthesized.traceback = "line 1\nline 2";
  synthesized.timestamp = 1;
  REQUIRE(WriteAgentErrorFile(dir.File("e.json"), synthesized, 2).ok());
  Result<ErrorFileData> reread = ReadErrorFile(dir.File("e.json"));
  REQUIRE(reread.ok());
  CHECK(reread->traceback == "line 1\nline 2");
}

TEST_CASE("Invalid UTF-8 from a worker does not stop the agent copy") {
  TempDir dir;
  ErrorFileData synthesized;
  synthesized.message = std::string("bad \xff byte");
  synthesized.timestamp = 1;
  REQUIRE(WriteAgentErrorFile(dir.File("e.json"), synthesized, 1).ok());
  CHECK(ReadErrorFile(dir.File("e.json")).ok());
}

TEST_CASE("Writing into a missing directory is an IOError naming the path") {
  TempDir dir;
  const std::string out = dir.File("no/such/dir/e.json");
  ErrorFileData data;
  data.message = "m";
  data.timestamp = 1;
  Status s = WriteAgentErrorFile(out, data, 1);
  CHECK(s.code() == Status::Code::kIOError);
  CHECK_THAT(s.message(), Catch::Contains(out));
}

TEST_CASE("The agent copy rejects root cause data whose JSON is broken") {
  TempDir dir;
  ErrorFileData data;
  data.raw_json = "{not json";
  CHECK(WriteAgentErrorFile(dir.File("e.json"), data, 1).IsInvalidArgument());
  CHECK(dir.Entries() == 0);
}

}  // namespace
}  // namespace ctrun::launcher
