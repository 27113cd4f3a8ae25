// The shared logs (ShipLogs, ReadLogs) over real gRPC on 127.0.0.1, through
// the agents' sink and `ctrun logs`' reader (log_client.h) and, for hostile
// input, a raw stub: lines come back once, labelled, numbered, in order; a
// follower sees new lines as they come and ends with the server; a wrong
// token, an unknown run, an oversized batch or host, and one reader too
// many are each refused with nothing kept. No sleeps: every wait is on a
// condition with a deadline.
#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/client/log_client.h"
#include "rendezvous/grpc/convert/proto_convert.h"
#include "rendezvous/grpc/server/server.h"
#include "tests/rendezvous/grpc/rdzv_test_client.h"

// A namespace of its own: the unity build puts other server tests' helpers
// (Server, ...) in the same translation unit.
namespace ctrun::rdzv::server_logs_test {

using testing::JoinStreamReader;
using testing::MakeJoin;
using testing::StartAutoServer;
using testing::TestClient;

// A one-node run "job" that the server holds while the returned stream lives.
std::unique_ptr<JoinStreamReader> HoldRun(TestClient& client, const std::string& token = "") {
  v1::JoinRequest join = MakeJoin("job", "a", 1, 1, 1);
  join.set_token(token);
  auto stream = client.Join(join);
  REQUIRE(stream->NextOf(v1::Update::kRoundComplete));
  return stream;
}

ClientOptions Options(int port, const std::string& token = "", const std::string& run_id = "job") {
  ClientOptions o;
  o.endpoint = "127.0.0.1:" + std::to_string(port);
  o.run_id = run_id;
  o.node = NodeId{"a", 1, 0};
  o.token = token;
  return o;
}

LogRecord Line(int rank, const std::string& text) {
  LogRecord r;
  r.rank = rank;
  r.local_rank = rank % 2;
  r.unix_s = 1000 + rank;
  r.text = text;
  return r;
}

// Sends `lines` as one chunk each (the agent's tee makes chunks of many).
Status Send(LogSink& sink, const std::vector<LogRecord>& lines, uint64_t dropped) {
  std::vector<LogChunk> chunks;
  for (const LogRecord& r : lines) {
    LogChunk c;
    c.rank = r.rank;
    c.local_rank = r.local_rank;
    c.unix_s = r.unix_s;
    c.text = r.text + "\n";
    c.lines = 1;
    chunks.push_back(std::move(c));
  }
  return sink.Send(chunks, dropped);
}

struct Collected {
  std::vector<LogRecord> lines;
  uint64_t dropped = 0;
};

Result<Collected> ReadAll(int port, const std::string& token = "", ReadLogsArgs args = {},
                          const std::string& run_id = "job") {
  Collected c;
  Status s = ReadLogs(Options(port, token, run_id), args, [&](const std::vector<LogRecord>& lines, uint64_t dropped) {
    c.lines.insert(c.lines.end(), lines.begin(), lines.end());
    c.dropped += dropped;
    return true;
  });
  if (!s.ok()) return s;
  return c;
}

std::unique_ptr<v1::Rendezvous::Stub> RawStub(int port) {
  return v1::Rendezvous::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
}

v1::LogBatch Header(const std::string& token = "") {
  v1::LogBatch b;
  b.set_version(kProtocolVersion);
  b.set_run_id("job");
  b.set_token(token);
  b.mutable_node()->set_addr("a");
  b.set_host("hostA");
  return b;
}

// The run "job" held on a fresh server, and a raw stub to it (for batches
// the agents' sink never sends).
struct HeldRun {
  std::unique_ptr<RendezvousServer> server = StartAutoServer();
  TestClient client{server->port()};
  std::unique_ptr<JoinStreamReader> run = HoldRun(client);
  std::unique_ptr<v1::Rendezvous::Stub> stub = RawStub(server->port());
};

// What one raw ShipLogs stream of `batch` gave: whether the batch was
// written, how the stream ended, and the reply.
struct Shipped {
  bool written = false;
  grpc::Status status;
  v1::ShipLogsReply reply;
};

Shipped ShipRaw(v1::Rendezvous::Stub& stub, const v1::LogBatch& batch) {
  grpc::ClientContext context;
  Shipped r;
  auto writer = stub.ShipLogs(&context, &r.reply);
  r.written = writer->Write(batch);
  writer->WritesDone();
  r.status = writer->Finish();
  return r;
}

TEST_CASE("logs: shipped lines come back once, labelled, numbered, in order") {
  auto server = StartAutoServer();
  TestClient client(server->port());
  auto run = HoldRun(client);
  LogSinkFactory sinks = MakeLogSinkFactory(Options(server->port()), "hostA");
  auto sink = sinks();
  REQUIRE(Send(*sink, {Line(0, "zero"), Line(1, "one")}, 0).ok());
  REQUIRE(Send(*sink, {Line(0, "two")}, 0).ok());
  REQUIRE(sink->Finish(std::chrono::seconds(5)).ok());

  Result<Collected> all = ReadAll(server->port());
  REQUIRE(all.ok());
  REQUIRE(all->lines.size() == 3);
  CHECK(all->dropped == 0);
  CHECK(all->lines[0].text == "zero");
  CHECK(all->lines[1].text == "one");
  CHECK(all->lines[2].text == "two");
  for (size_t i = 0; i < 3; ++i) {
    CHECK(all->lines[i].seq == i + 1);
    CHECK(all->lines[i].node == "hostA");
  }
  CHECK(all->lines[1].rank == 1);

  ReadLogsArgs rank0;
  rank0.rank = 0;
  Result<Collected> only0 = ReadAll(server->port(), "", rank0);
  REQUIRE(only0.ok());
  CHECK(only0->lines.size() == 2);
  CHECK(only0->dropped == 0);
}

TEST_CASE("logs: a line that is not UTF-8 (binary output, a character cut at 16 KiB) comes back as written") {
  auto server = StartAutoServer();
  TestClient client(server->port());
  auto run = HoldRun(client);
  auto sink = MakeLogSinkFactory(Options(server->port()), "hostA")();
  const std::string cut = "caf\xc3";        // the first byte of a two-byte character
  const std::string binary = "\xff\xfe\x01x";  // never UTF-8
  REQUIRE(Send(*sink, {Line(0, cut), Line(1, binary), Line(0, "after")}, 0).ok());
  REQUIRE(sink->Finish(std::chrono::seconds(5)).ok());
  Result<Collected> all = ReadAll(server->port());
  REQUIRE(all.ok());
  REQUIRE(all->lines.size() == 3);
  CHECK(all->lines[0].text == cut);
  CHECK(all->lines[1].text == binary);
  CHECK(all->lines[2].text == "after");
}

TEST_CASE("logs: a node's dropped lines reach the reader as a gap") {
  auto server = StartAutoServer();
  TestClient client(server->port());
  auto run = HoldRun(client);
  auto sink = MakeLogSinkFactory(Options(server->port()), "hostA")();
  REQUIRE(Send(*sink, {Line(0, "a")}, 0).ok());
  REQUIRE(Send(*sink, {Line(0, "b")}, 7).ok());
  REQUIRE(sink->Finish(std::chrono::seconds(5)).ok());
  Result<Collected> all = ReadAll(server->port());
  REQUIRE(all.ok());
  CHECK(all->lines.size() == 2);
  CHECK(all->dropped == 7);
}

TEST_CASE("logs: a follower gets the backlog, then each new line once, and ends with the server") {
  auto server = StartAutoServer();
  TestClient client(server->port());
  auto run = HoldRun(client);
  auto sink = MakeLogSinkFactory(Options(server->port()), "hostA")();
  REQUIRE(Send(*sink, {Line(0, "before")}, 0).ok());

  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> seen;
  Status ended = Status::Internal("not ended");
  bool done = false;
  std::thread follower([&] {
    ReadLogsArgs args;
    args.follow = true;
    Status s = ReadLogs(Options(server->port()), args, [&](const std::vector<LogRecord>& lines, uint64_t) {
      std::lock_guard<std::mutex> lock(mu);
      for (const LogRecord& l : lines) seen.push_back(l.text);
      cv.notify_all();
      return true;
    });
    std::lock_guard<std::mutex> lock(mu);
    ended = s;
    done = true;
    cv.notify_all();
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_until(lock, deadline, [&] { return seen.size() == 1; }));
  }
  REQUIRE(Send(*sink, {Line(1, "after1"), Line(0, "after2")}, 0).ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_until(lock, deadline, [&] { return seen.size() == 3; }));
    CHECK(seen == std::vector<std::string>{"before", "after1", "after2"});
  }
  REQUIRE(sink->Finish(std::chrono::seconds(5)).ok());
  server->Shutdown();
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_until(lock, deadline, [&] { return done; }));
    CHECK(ended.ok());
    CHECK(seen.size() == 3);
  }
  follower.join();
}

TEST_CASE("logs: a wrong token is refused on both calls and nothing is kept") {
  auto server = StartAutoServer("s3cret");
  TestClient client(server->port());
  auto run = HoldRun(client, "s3cret");
  auto sink = MakeLogSinkFactory(Options(server->port(), "wrong"), "hostA")();
  Status sent = Send(*sink, {Line(0, "secret line")}, 0);
  Status finished = sent.ok() ? sink->Finish(std::chrono::seconds(5)) : sent;
  CHECK(finished.code() == Status::Code::kFailedPrecondition);
  Result<Collected> wrong = ReadAll(server->port(), "wrong");
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.status().code() == Status::Code::kFailedPrecondition);
  Result<Collected> right = ReadAll(server->port(), "s3cret");
  REQUIRE(right.ok());
  CHECK(right->lines.empty());
}

TEST_CASE("logs: an unknown run is NOT_FOUND for both calls") {
  auto server = StartAutoServer();
  Result<Collected> read = ReadAll(server->port(), "", {}, "nosuch");
  REQUIRE_FALSE(read.ok());
  CHECK(read.status().code() == Status::Code::kNotFound);
  auto sink = MakeLogSinkFactory(Options(server->port(), "", "nosuch"), "hostA")();
  Status sent = Send(*sink, {Line(0, "x")}, 0);
  Status finished = sent.ok() ? sink->Finish(std::chrono::seconds(5)) : sent;
  CHECK(finished.code() == Status::Code::kNotFound);
}

TEST_CASE("logs: an oversized batch or host label ends the stream, INVALID_ARGUMENT, nothing kept") {
  HeldRun held;
  {
    v1::LogBatch batch = Header();
    for (int i = 0; i < 70; ++i) batch.add_lines()->set_text(std::string(16 * 1024, 'x'));  // > 1 MiB
    CHECK(ShipRaw(*held.stub, batch).status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    v1::LogBatch batch = Header();
    batch.set_host(std::string(300, 'h'));
    batch.add_lines()->set_text("x");
    CHECK(ShipRaw(*held.stub, batch).status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  }
  Result<Collected> all = ReadAll(held.server->port());
  REQUIRE(all.ok());
  CHECK(all->lines.empty());
}

TEST_CASE("logs: a line over 16 KiB is cut; the reply counts the lines accepted") {
  HeldRun held;
  v1::LogBatch batch = Header();
  batch.add_lines()->set_text(std::string(20 * 1024, 'y'));
  batch.add_lines()->set_text("short");
  Shipped shipped = ShipRaw(*held.stub, batch);
  REQUIRE(shipped.written);
  REQUIRE(shipped.status.ok());
  CHECK(shipped.reply.accepted() == 2);
  Result<Collected> all = ReadAll(held.server->port());
  REQUIRE(all.ok());
  REQUIRE(all->lines.size() == 2);
  CHECK(all->lines[0].text.size() == kMaxLogLineBytes);
}

v1::LogChunk* AddChunk(v1::LogBatch& batch, int rank, const std::string& text) {
  v1::LogChunk* c = batch.add_chunks();
  c->set_rank(rank);
  c->set_text(text);
  return c;
}

TEST_CASE("logs: a mixed batch (lines and chunks) is kept line by line, lines first, every line numbered") {
  HeldRun held;
  v1::LogBatch batch = Header();
  AddChunk(batch, 1, "c1\nc2\n\nc4\n");
  AddChunk(batch, 2, "");  // empty: ignored
  AddChunk(batch, 3, std::string(20 * 1024, 'z') + "\nafter\n");
  batch.add_lines()->set_text("single");
  Shipped shipped = ShipRaw(*held.stub, batch);
  REQUIRE(shipped.written);
  REQUIRE(shipped.status.ok());
  CHECK(shipped.reply.accepted() == 7);
  Result<Collected> all = ReadAll(held.server->port());
  REQUIRE(all.ok());
  REQUIRE(all->lines.size() == 7);
  CHECK(all->lines[0].text == "single");
  CHECK(all->lines[1].text == "c1");
  CHECK(all->lines[1].rank == 1);
  CHECK(all->lines[3].text.empty());
  CHECK(all->lines[4].text == "c4");
  CHECK(all->lines[5].text.size() == kMaxLogLineBytes);
  CHECK(all->lines[5].rank == 3);
  CHECK(all->lines[6].text == "after");
  for (size_t i = 0; i < all->lines.size(); ++i) {
    CHECK(all->lines[i].seq == i + 1);
    CHECK(all->lines[i].node == "hostA");
  }
}

TEST_CASE("logs: a reader of chunks gets the same lines as chunks, numbered and labelled; an old reader still lines") {
  HeldRun held;
  v1::LogBatch batch = Header();
  AddChunk(batch, 1, "c1\nc2\n\nc4\n");
  AddChunk(batch, 3, "d1\nd2\n");
  batch.add_lines()->set_text("single");
  Shipped shipped = ShipRaw(*held.stub, batch);
  REQUIRE(shipped.status.ok());
  REQUIRE(shipped.reply.accepted() == 7);
  ReadLogsArgs args;
  std::vector<LogReadChunk> chunks;
  Status s = ReadLogChunks(Options(held.server->port()), args, [&](const std::vector<LogReadChunk>& got, uint64_t dropped) {
    CHECK(dropped == 0);
    chunks.insert(chunks.end(), got.begin(), got.end());
    return true;
  });
  REQUIRE(s.ok());
  REQUIRE(chunks.size() == 3);  // the single line is a chunk of its own, then the two chunks whole
  CHECK(chunks[0].text == "single\n");
  CHECK(chunks[0].first_seq == 1);
  CHECK(chunks[1].text == "c1\nc2\n\nc4\n");
  CHECK(chunks[1].first_seq == 2);
  CHECK(chunks[1].rank == 1);
  CHECK(chunks[2].text == "d1\nd2\n");
  CHECK(chunks[2].first_seq == 6);
  CHECK(chunks[2].rank == 3);
  for (const LogReadChunk& c : chunks) CHECK(c.node == "hostA");

  // Chunks go only to a reader that asks: an older one gets lines.
  grpc::ClientContext context;
  v1::ReadLogsRequest request;
  request.set_version(kProtocolVersion);
  request.set_run_id("job");
  auto reader = held.stub->ReadLogs(&context, request);  // an older reader: no `chunks`
  v1::LogLines message;
  size_t lines = 0;
  while (reader->Read(&message)) {
    CHECK(message.chunks_size() == 0);
    lines += static_cast<size_t>(message.lines_size());
  }
  CHECK(reader->Finish().ok());
  CHECK(lines == 7);

  ReadLogsArgs rank3;
  rank3.rank = 3;
  chunks.clear();
  s = ReadLogChunks(Options(held.server->port()), rank3, [&](const std::vector<LogReadChunk>& got, uint64_t) {
    chunks.insert(chunks.end(), got.begin(), got.end());
    return true;
  });
  REQUIRE(s.ok());
  REQUIRE(chunks.size() == 1);
  CHECK(chunks[0].text == "d1\nd2\n");
  CHECK(chunks[0].first_seq == 6);

  // A follower that stops after its first message ends at once, OK (its
  // read ahead is cancelled), though the server would go on.
  ReadLogsArgs follow;
  follow.follow = true;
  int calls = 0;
  s = ReadLogChunks(Options(held.server->port()), follow, [&](const std::vector<LogReadChunk>& got, uint64_t) {
    ++calls;
    CHECK(got.size() == 3);
    return false;
  });
  CHECK(s.ok());
  CHECK(calls == 1);
}

TEST_CASE("logs: a chunk without a final newline or a batch of 1 MiB + 1 ends the stream, nothing of it kept") {
  HeldRun held;
  {
    v1::LogBatch batch = Header();
    AddChunk(batch, 0, "whole\n");
    AddChunk(batch, 0, "whole\npartial");
    grpc::Status s = ShipRaw(*held.stub, batch).status;
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(s.error_message().find("chunks[1].text") != std::string::npos);
  }
  {
    v1::LogBatch batch = Header();
    AddChunk(batch, 0, "x\n");
    const size_t size = batch.ByteSizeLong();
    // One more chunk whose encoding brings the batch to 1 MiB + 1 exactly.
    std::string text(kMaxLogBatchBytes - size, 'y');
    v1::LogChunk* big = AddChunk(batch, 0, text);
    while (batch.ByteSizeLong() > kMaxLogBatchBytes + 1) {
      text.pop_back();
      big->set_text(text);
    }
    while (batch.ByteSizeLong() < kMaxLogBatchBytes + 1) {
      text.push_back('y');
      big->set_text(text);
    }
    text.back() = '\n';
    big->set_text(text);
    REQUIRE(batch.ByteSizeLong() == kMaxLogBatchBytes + 1);
    CHECK(ShipRaw(*held.stub, batch).status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  }
  Result<Collected> all = ReadAll(held.server->port());
  REQUIRE(all.ok());
  CHECK(all->lines.empty());
}

TEST_CASE("logs: one reader over the cap is RESOURCE_EXHAUSTED; the others are served") {
  auto server = StartAutoServer();
  TestClient client(server->port());
  auto run = HoldRun(client);
  auto sink = MakeLogSinkFactory(Options(server->port()), "hostA")();
  REQUIRE(Send(*sink, {Line(0, "x")}, 0).ok());
  auto stub = RawStub(server->port());
  v1::ReadLogsRequest request;
  request.set_version(kProtocolVersion);
  request.set_run_id("job");
  request.set_follow(true);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReaderInterface<v1::LogLines>>> readers;
  for (int i = 0; i < 64; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    readers.push_back(stub->ReadLogs(contexts.back().get(), request));
    v1::LogLines first;
    REQUIRE(readers.back()->Read(&first));  // the backlog: the server holds this reader
    CHECK(first.lines_size() == 1);
  }
  grpc::ClientContext context;
  auto extra = stub->ReadLogs(&context, request);
  v1::LogLines none;
  CHECK_FALSE(extra->Read(&none));
  CHECK(extra->Finish().error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  for (size_t i = 0; i < readers.size(); ++i) {
    contexts[i]->TryCancel();
    (void)readers[i]->Finish();
  }
  REQUIRE(sink->Finish(std::chrono::seconds(5)).ok());
}

}  // namespace ctrun::rdzv::server_logs_test
