#include "rendezvous/grpc/client/log_client.h"

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <utility>

#include "rendezvous.grpc.pb.h"
#include "rendezvous/grpc/client/call_status.h"
#include "rendezvous/grpc/client/channel.h"
#include "rendezvous/grpc/client/read_ahead.h"
#include "rendezvous/grpc/convert/proto_convert.h"

namespace ctrun::rdzv {
namespace {

// CallStatus, with the codes only the log calls get (a run the server does
// not hold, a refused batch, a server with no shared logs).
Status FromGrpc(const grpc::Status& s, const std::string& endpoint) {
  const std::string what = s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::NOT_FOUND: return Status::NotFound(what);
    case grpc::StatusCode::INVALID_ARGUMENT: return Status::InvalidArgument(what);
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return Status::ResourceExhausted(what);
    case grpc::StatusCode::DEADLINE_EXCEEDED: return Status::Unavailable("rendezvous at " + endpoint + ": " + what);
    case grpc::StatusCode::UNIMPLEMENTED:
      return Status::FailedPrecondition("the rendezvous at " + endpoint +
                                        " keeps no shared logs (an older ctrun or ctrund): use the same version on "
                                        "every node and the server");
    default:
      return CallStatus(s, endpoint, "use the CA that signed the server's certificate (tls_ca) and TLS on both "
                                     "sides or on neither");
  }
}

class GrpcLogSink final : public LogSink {
 public:
  GrpcLogSink(std::shared_ptr<v1::Rendezvous::Stub> stub, const ClientOptions& options, std::string host)
      : stub_(std::move(stub)), endpoint_(options.endpoint) {
    header_.set_version(kProtocolVersion);
    header_.set_run_id(options.run_id);
    header_.set_token(options.token);
    NodeToProto(options.node, header_.mutable_node());
    header_.set_host(std::move(host));
  }

  ~GrpcLogSink() override {
    if (writer_ && !finished_) {
      context_.TryCancel();
      (void)writer_->Finish();
    }
  }

  Status Send(std::vector<LogChunk>& chunks, uint64_t dropped) override {
    if (!writer_) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (cancelled_) return Status::Aborted("rendezvous call cancelled");
        started_ = true;
      }
      writer_ = stub_->ShipLogs(&context_, &reply_);
    }
    // The first batch carries the header; later ones only the chunks. One
    // message is reused, and each chunk's text is swapped into it, not
    // copied: a batch costs no copy of the text and no allocation per line.
    // The server counts the lines and cuts the long ones.
    v1::LogBatch& batch = batch_;
    batch.Clear();
    if (first_) {
      batch.set_version(header_.version());
      batch.set_run_id(header_.run_id());
      batch.set_token(header_.token());
      *batch.mutable_node() = header_.node();
      batch.set_host(header_.host());
    }
    first_ = false;
    batch.set_dropped(dropped);
    batch.mutable_chunks()->Reserve(static_cast<int>(chunks.size()));
    for (LogChunk& c : chunks) {
      if (c.text.empty()) continue;
      if (c.text.back() != '\n') c.text.push_back('\n');  // whole lines only
      v1::LogChunk* m = batch.add_chunks();
      m->set_rank(c.rank);
      m->set_local_rank(c.local_rank);
      m->set_is_stderr(c.is_stderr);
      m->set_unix_s(c.unix_s);
      m->mutable_text()->swap(c.text);
    }
    const size_t bytes = batch.ByteSizeLong();
    if (writer_->Write(batch)) {
      wire_bytes_ += bytes;
      return Status::Ok();
    }
    finished_ = true;
    grpc::Status s = writer_->Finish();
    if (s.ok()) return Status::Unavailable("rendezvous at " + endpoint_ + " ended the log stream");
    return FromGrpc(s, endpoint_);
  }

  Status Finish(Duration /*timeout: Cancel bounds it*/) override {
    if (!writer_ || finished_) return Status::Ok();
    finished_ = true;
    writer_->WritesDone();
    return FromGrpc(writer_->Finish(), endpoint_);
  }

  uint64_t WireBytes() const override { return wire_bytes_; }

  void Cancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    if (started_) context_.TryCancel();
  }

 private:
  std::shared_ptr<v1::Rendezvous::Stub> stub_;
  const std::string endpoint_;
  v1::LogBatch header_;
  v1::LogBatch batch_;  // reused by every Send
  grpc::ClientContext context_;
  v1::ShipLogsReply reply_;
  std::unique_ptr<grpc::ClientWriterInterface<v1::LogBatch>> writer_;
  bool first_ = true;
  bool finished_ = false;
  uint64_t wire_bytes_ = 0;
  std::mutex mu_;  // guards the two below (Cancel comes from another thread)
  bool started_ = false;
  bool cancelled_ = false;
};

// How many messages ReadLogChunks holds: the one handed out, the one being
// read, and one read and waiting.
constexpr size_t kLogReadAhead = 3;

// The ReadLogs request of `args` for options.run_id.
v1::ReadLogsRequest ReadRequest(const ClientOptions& options, const ReadLogsArgs& args, bool chunks) {
  v1::ReadLogsRequest request;
  request.set_version(kProtocolVersion);
  request.set_run_id(options.run_id);
  request.set_only_run(options.run_id.empty());
  request.set_token(options.token);
  request.set_follow(args.follow);
  if (args.rank) {
    request.set_has_rank(true);
    request.set_rank(*args.rank);
  }
  request.set_node(args.node);
  request.set_since_unix_s(args.since_unix_s);
  request.set_chunks(chunks);
  return request;
}

// Fills `out` (resized; its strings keep their memory) with the message's
// chunks, or with its lines as chunks of one line each (an older server).
void ChunksOf(const v1::LogLines& message, std::vector<LogReadChunk>& out) {
  const bool lines = message.lines_size() > 0;
  out.resize(static_cast<size_t>(lines ? message.lines_size() : message.chunks_size()));
  for (size_t i = 0; i < out.size(); ++i) {
    LogReadChunk& c = out[i];
    if (lines) {
      const v1::LogLine& l = message.lines(static_cast<int>(i));
      c.rank = l.rank();
      c.local_rank = l.local_rank();
      c.is_stderr = l.is_stderr();
      c.unix_s = l.unix_s();
      c.first_seq = l.seq();
      c.node.assign(l.node());
      c.text.assign(l.text());
      c.text.push_back('\n');
      continue;
    }
    const v1::LogChunk& m = message.chunks(static_cast<int>(i));
    c.rank = m.rank();
    c.local_rank = m.local_rank();
    c.is_stderr = m.is_stderr();
    c.unix_s = m.unix_s();
    c.first_seq = m.first_seq();
    c.node.assign(m.node());
    c.text.assign(m.text());
    if (!c.text.empty() && c.text.back() != '\n') c.text.push_back('\n');  // whole lines only
  }
}

}  // namespace

LogSinkFactory MakeLogSinkFactory(const ClientOptions& options, std::string host) {
  if (host.size() > kMaxLogHostBytes) host.resize(kMaxLogHostBytes);
  auto stub =
      std::shared_ptr<v1::Rendezvous::Stub>(v1::Rendezvous::NewStub(MakeClientChannel(options.endpoint, options.tls)));
  return [stub, options, host]() -> std::unique_ptr<LogSink> {
    return std::make_unique<GrpcLogSink>(stub, options, host);
  };
}

Status ReadLogs(const ClientOptions& options, const ReadLogsArgs& args, const LogLinesCallback& on_lines) {
  std::unique_ptr<v1::Rendezvous::Stub> stub = v1::Rendezvous::NewStub(MakeClientChannel(options.endpoint, options.tls));
  const v1::ReadLogsRequest request = ReadRequest(options, args, false);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderInterface<v1::LogLines>> reader = stub->ReadLogs(&context, request);
  // The message and the records are reused: each record's strings keep
  // their memory from one message to the next, so a steady stream costs no
  // allocation per line.
  v1::LogLines message;
  std::vector<LogRecord> lines;
  while (reader->Read(&message)) {
    lines.resize(static_cast<size_t>(message.lines_size()));
    for (int i = 0; i < message.lines_size(); ++i) {
      const v1::LogLine& l = message.lines(i);
      LogRecord& r = lines[static_cast<size_t>(i)];
      r.rank = l.rank();
      r.local_rank = l.local_rank();
      r.is_stderr = l.is_stderr();
      r.unix_s = l.unix_s();
      r.text.assign(l.text());
      r.seq = l.seq();
      r.node.assign(l.node());
    }
    if (!on_lines(lines, message.dropped())) {
      context.TryCancel();
      (void)reader->Finish();
      return Status::Ok();
    }
  }
  return FromGrpc(reader->Finish(), options.endpoint);
}

Status ReadLogChunks(const ClientOptions& options, const ReadLogsArgs& args, const LogChunksCallback& on_chunks) {
  std::unique_ptr<v1::Rendezvous::Stub> stub = v1::Rendezvous::NewStub(MakeClientChannel(options.endpoint, options.tls));
  const v1::ReadLogsRequest request = ReadRequest(options, args, true);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderInterface<v1::LogLines>> reader = stub->ReadLogs(&context, request);
  // The next message is read while the callback handles this one (at most
  // kLogReadAhead messages held, each under 4 MiB). The messages and the
  // chunks are reused (their strings keep their memory).
  std::vector<LogReadChunk> chunks;
  bool stopped = false;
  {
    ReadAhead<v1::LogLines> ahead(reader.get(), kLogReadAhead);
    while (const v1::LogLines* message = ahead.Next()) {
      ChunksOf(*message, chunks);
      if (!on_chunks(chunks, message->dropped())) {
        stopped = true;
        context.TryCancel();  // ends the pending Read
        break;
      }
    }
  }
  grpc::Status status = reader->Finish();
  return stopped ? Status::Ok() : FromGrpc(status, options.endpoint);
}

}  // namespace ctrun::rdzv
