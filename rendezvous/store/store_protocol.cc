#include "rendezvous/store/store_protocol.h"

#include <algorithm>
#include <cstring>

namespace ctrun::rdzv {

namespace {

// Wire type -> op, per dialect; nullopt: not a request we serve.
std::optional<StoreOp> OpOf(StoreDialect d, uint8_t type) {
  static constexpr StoreOp kV1[] = {StoreOp::kSet,   StoreOp::kCompareSet, StoreOp::kGet,
                                    StoreOp::kAdd,   StoreOp::kCheck,      StoreOp::kWait,
                                    StoreOp::kNumKeys};
  static constexpr StoreOp kV2[] = {
      StoreOp::kValidate, StoreOp::kSet,       StoreOp::kCompareSet, StoreOp::kGet,
      StoreOp::kAdd,      StoreOp::kCheck,     StoreOp::kWait,       StoreOp::kNumKeys,
      StoreOp::kDeleteKey, StoreOp::kAppend,   StoreOp::kMultiGet,   StoreOp::kMultiSet,
      StoreOp::kCancelWait, StoreOp::kPing};
  if (d == StoreDialect::kV1) {
    if (type < std::size(kV1)) return kV1[type];
    if (type == 8) return StoreOp::kDeleteKey;  // 7 is WATCH_KEY: not served
    return std::nullopt;
  }
  if (type < std::size(kV2)) return kV2[type];
  return std::nullopt;
}

// A cursor over the unconsumed bytes. Each Read* returns false when the
// bytes are not all there yet; `error` is set when they never can be.
class Reader {
 public:
  Reader(std::string_view bytes, const StoreLimits& limits)
      : bytes_(bytes), limits_(limits), max_total_(limits.max_request_bytes) {}

  // Lowers the cap on the request's size (MULTI_SET's).
  void LimitTotal(uint64_t max) { max_total_ = std::min(max_total_, max); }

  template <typename T>
  bool Value(T& v) {
    if (bytes_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  bool Bytes(std::string& out, uint64_t max, const char* what) {
    uint64_t n = 0;
    if (!Value(n)) return false;
    if (n > max) {
      error = Status::InvalidArgument(std::string(what) + " of " + std::to_string(n) +
                                      " bytes (the limit is " + std::to_string(max) + ")");
      return false;
    }
    if (pos_ + n > max_total_) {
      error = Status::InvalidArgument("a request over " + std::to_string(max_total_) + " bytes");
      return false;
    }
    if (bytes_.size() - pos_ < n) return false;
    out.assign(bytes_.data() + pos_, n);
    pos_ += n;
    return true;
  }

  bool Key(std::string& out) { return Bytes(out, limits_.max_key_bytes, "a key"); }
  bool Val(std::string& out) { return Bytes(out, limits_.max_value_bytes, "a value"); }

  bool Count(uint64_t& n) {
    if (!Value(n)) return false;
    if (n > limits_.max_keys) {
      error = Status::InvalidArgument(std::to_string(n) + " keys in one request (the limit is " +
                                      std::to_string(limits_.max_keys) + ")");
      return false;
    }
    return true;
  }

  // Steps over `n` bytes that are there (the caller checked).
  bool Skip(uint64_t n) {
    pos_ += n;
    return true;
  }

  size_t pos() const { return pos_; }
  uint64_t multi_limit() const { return limits_.max_multi_bytes; }
  Status error;

 private:
  std::string_view bytes_;
  const StoreLimits& limits_;
  uint64_t max_total_;
  size_t pos_ = 0;
};

// Decodes the arguments of `op` into `req`, whose keys and values are sized
// to what the request has (strings are reused). False: incomplete, or
// r.error is set.
bool ReadArgs(Reader& r, StoreRequest& req) {
  auto sized = [&](size_t keys, size_t values) {
    req.keys.resize(keys);
    req.values.resize(values);
  };
  switch (req.op) {
    case StoreOp::kValidate: {
      sized(0, 0);
      uint32_t magic = 0;
      if (!r.Value(magic)) return false;
      if (magic != kStoreValidateMagic) {
        r.error = Status::InvalidArgument("VALIDATE with a wrong magic number");
        return false;
      }
      return true;
    }
    case StoreOp::kSet:
    case StoreOp::kAppend:
      sized(1, 1);
      return r.Key(req.keys[0]) && r.Val(req.values[0]);
    case StoreOp::kCompareSet:
      sized(1, 2);
      return r.Key(req.keys[0]) && r.Val(req.values[0]) && r.Val(req.values[1]);
    case StoreOp::kGet:
    case StoreOp::kDeleteKey:
      sized(1, 0);
      return r.Key(req.keys[0]);
    case StoreOp::kAdd:
      sized(1, 0);
      return r.Key(req.keys[0]) && r.Value(req.number);
    case StoreOp::kCheck:
    case StoreOp::kWait:
    case StoreOp::kMultiGet: {
      sized(0, 0);
      uint64_t n = 0;
      if (!r.Count(n)) return false;
      for (uint64_t i = 0; i < n; ++i) {
        if (!r.Key(req.keys.emplace_back())) return false;
      }
      return true;
    }
    case StoreOp::kMultiSet: {
      sized(0, 0);
      r.LimitTotal(r.multi_limit());
      uint64_t n = 0;
      if (!r.Count(n)) return false;
      for (uint64_t i = 0; i < n; ++i) {
        if (!r.Key(req.keys.emplace_back()) || !r.Val(req.values.emplace_back())) return false;
      }
      return true;
    }
    case StoreOp::kNumKeys:
    case StoreOp::kCancelWait:
      sized(0, 0);
      return true;
    case StoreOp::kPing: {
      sized(0, 0);
      uint32_t nonce = 0;
      if (!r.Value(nonce)) return false;
      req.number = nonce;
      return true;
    }
  }
  return true;
}

}  // namespace

StoreParser::StoreParser(const StoreParser& other)
    : limits_(other.limits_), dialect_(other.dialect_), failed_(other.failed_) {
  Feed(other.buffer_.get() + other.consumed_, other.end_ - other.consumed_);
}

StoreParser& StoreParser::operator=(const StoreParser& other) {
  if (this != &other) *this = StoreParser(other);
  return *this;
}

char* StoreParser::Space(size_t want) {
  if (capacity_ - end_ < want) {
    const size_t kept = end_ - consumed_;
    if (capacity_ - kept >= want && consumed_ > 0) {
      // Dropping the consumed bytes makes room.
      std::memmove(buffer_.get(), buffer_.get() + consumed_, kept);
    } else {
      const size_t capacity = std::max(capacity_ * 2, kept + want);
      std::unique_ptr<char[]> grown(new char[capacity]);
      if (kept > 0) std::memcpy(grown.get(), buffer_.get() + consumed_, kept);
      buffer_ = std::move(grown);
      capacity_ = capacity;
    }
    consumed_ = 0;
    end_ = kept;
  }
  return buffer_.get() + end_;
}

void StoreParser::Feed(const void* data, size_t size) {
  if (!failed_.ok() || size == 0) return;
  std::memcpy(Space(size), data, size);
  Commit(size);
}

Result<std::optional<StoreRequest>> StoreParser::Next() {
  StoreRequest req;
  Result<bool> got = Next(req);
  if (!got.ok()) return got.status();
  if (!*got) return std::optional<StoreRequest>();
  return std::optional<StoreRequest>(std::move(req));
}

Result<bool> StoreParser::Next(StoreRequest& req) {
  if (!failed_.ok()) return failed_;
  const std::string_view rest(buffer_.get() + consumed_, end_ - consumed_);
  if (rest.empty()) return false;
  const uint8_t type = static_cast<uint8_t>(rest[0]);

  StoreDialect dialect = dialect_;
  if (dialect == StoreDialect::kUnknown) {
    if (type == 0 && rest.size() < 5) return false;
    uint32_t magic = 0;
    if (type == 0) std::memcpy(&magic, rest.data() + 1, sizeof(magic));
    dialect = (type == 0 && magic == kStoreValidateMagic) ? StoreDialect::kV2 : StoreDialect::kV1;
  }
  std::optional<StoreOp> op = OpOf(dialect, type);
  if (!op) {
    failed_ = Status::InvalidArgument("unknown request type " + std::to_string(type) +
                                      (dialect == StoreDialect::kV1 ? " (torch 1.13 dialect)"
                                                                    : " (torch 2.x dialect)"));
    return failed_;
  }
  if (*op == StoreOp::kValidate && dialect_ != StoreDialect::kUnknown) {
    failed_ = Status::InvalidArgument("VALIDATE after the first request");
    return failed_;
  }
  req.op = *op;
  req.number = 0;
  Reader r(rest.substr(1), limits_);
  if (!ReadArgs(r, req)) {
    if (r.error.ok()) return false;
    failed_ = Status::InvalidArgument(std::string(StoreOpName(*op)) + ": " + r.error.message());
    return failed_;
  }
  dialect_ = dialect;
  consumed_ += 1 + r.pos();
  if (consumed_ == end_) {  // all consumed: start over at the front
    consumed_ = end_ = 0;
    if (capacity_ > kKeepBytes) {
      buffer_.reset();
      capacity_ = 0;
    }
  }
  return true;
}

namespace {

// Op -> wire type in `d` (the inverse of OpOf); nullopt: the dialect has none.
std::optional<uint8_t> TypeOf(StoreDialect d, StoreOp op) {
  for (uint8_t type = 0; type < 16; ++type) {
    if (d == StoreDialect::kV1 && type == 7) continue;  // WATCH_KEY
    if (OpOf(d, type) == op) return type;
  }
  return std::nullopt;
}

void AppendKeys(std::string& out, const std::vector<std::string>& keys) {
  AppendStoreInt64(out, static_cast<int64_t>(keys.size()));
  for (const std::string& k : keys) AppendStoreBytes(out, k);
}

}  // namespace

Status AppendStoreRequest(std::string& out, StoreDialect dialect, const StoreRequest& req) {
  const std::optional<uint8_t> type =
      dialect == StoreDialect::kUnknown ? std::nullopt : TypeOf(dialect, req.op);
  if (!type) {
    return Status::InvalidArgument(std::string(StoreOpName(req.op)) + " has no wire form in the " +
                                   (dialect == StoreDialect::kV1 ? "torch 1.13" : "given") +
                                   " dialect");
  }
  AppendStoreUint8(out, *type);
  switch (req.op) {
    case StoreOp::kValidate:
      AppendStoreUint32(out, kStoreValidateMagic);
      break;
    case StoreOp::kSet:
    case StoreOp::kAppend:
      AppendStoreBytes(out, req.keys.at(0));
      AppendStoreBytes(out, req.values.at(0));
      break;
    case StoreOp::kCompareSet:
      AppendStoreBytes(out, req.keys.at(0));
      AppendStoreBytes(out, req.values.at(0));
      AppendStoreBytes(out, req.values.at(1));
      break;
    case StoreOp::kGet:
    case StoreOp::kDeleteKey:
      AppendStoreBytes(out, req.keys.at(0));
      break;
    case StoreOp::kAdd:
      AppendStoreBytes(out, req.keys.at(0));
      AppendStoreInt64(out, req.number);
      break;
    case StoreOp::kCheck:
    case StoreOp::kWait:
    case StoreOp::kMultiGet:
      AppendKeys(out, req.keys);
      break;
    case StoreOp::kMultiSet:
      AppendStoreInt64(out, static_cast<int64_t>(req.keys.size()));
      for (size_t i = 0; i < req.keys.size(); ++i) {
        AppendStoreBytes(out, req.keys[i]);
        AppendStoreBytes(out, req.values.at(i));
      }
      break;
    case StoreOp::kNumKeys:
    case StoreOp::kCancelWait:
      break;
    case StoreOp::kPing:
      AppendStoreUint32(out, static_cast<uint32_t>(req.number));
      break;
  }
  return Status::Ok();
}

bool StoreOpHasReply(StoreOp op) {
  switch (op) {
    case StoreOp::kValidate:
    case StoreOp::kSet:
    case StoreOp::kAppend:
    case StoreOp::kMultiSet:
      return false;
    default:
      return true;
  }
}

Result<std::optional<size_t>> ParseStoreReply(std::string_view bytes, const StoreRequest& req,
                                              StoreReply& out, const StoreLimits& limits) {
  out.values.clear();
  out.number = 0;
  Reader r(bytes, limits);
  auto view = [&]() -> bool {  // one uint64 length + bytes, as a view
    uint64_t n = 0;
    if (!r.Value(n)) return false;
    if (n > limits.max_value_bytes) {
      r.error = Status::InvalidArgument("a reply value of " + std::to_string(n) +
                                        " bytes (the limit is " +
                                        std::to_string(limits.max_value_bytes) + ")");
      return false;
    }
    if (bytes.size() - r.pos() < n) return false;
    out.values.push_back(bytes.substr(r.pos(), n));
    return r.Skip(n);
  };
  bool done = true;
  switch (req.op) {
    case StoreOp::kValidate:
    case StoreOp::kSet:
    case StoreOp::kAppend:
    case StoreOp::kMultiSet:
      break;
    case StoreOp::kGet:
    case StoreOp::kCompareSet:
      done = view();
      break;
    case StoreOp::kMultiGet:
      for (size_t i = 0; i < req.keys.size() && done; ++i) done = view();
      break;
    case StoreOp::kAdd:
    case StoreOp::kNumKeys:
    case StoreOp::kDeleteKey:
      done = r.Value(out.number);
      break;
    case StoreOp::kCheck:
    case StoreOp::kWait:
    case StoreOp::kCancelWait: {
      uint8_t v = 0;
      done = r.Value(v);
      out.number = v;
      break;
    }
    case StoreOp::kPing: {
      uint32_t v = 0;
      done = r.Value(v);
      out.number = v;
      break;
    }
  }
  if (!r.error.ok()) return Status::InvalidArgument(std::string(StoreOpName(req.op)) + "'s reply: " +
                                                    r.error.message());
  if (!done) return std::optional<size_t>();
  return std::optional<size_t>(r.pos());
}

void AppendStoreBytes(std::string& out, std::string_view bytes) {
  const uint64_t n = bytes.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof(n));
  out.append(bytes);
}

void AppendStoreInt64(std::string& out, int64_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void AppendStoreUint8(std::string& out, uint8_t v) { out.push_back(static_cast<char>(v)); }

void AppendStoreUint32(std::string& out, uint32_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

std::string_view StoreOpName(StoreOp op) {
  switch (op) {
    case StoreOp::kValidate: return "VALIDATE";
    case StoreOp::kSet: return "SET";
    case StoreOp::kCompareSet: return "COMPARE_SET";
    case StoreOp::kGet: return "GET";
    case StoreOp::kAdd: return "ADD";
    case StoreOp::kCheck: return "CHECK";
    case StoreOp::kWait: return "WAIT";
    case StoreOp::kNumKeys: return "GETNUMKEYS";
    case StoreOp::kDeleteKey: return "DELETE_KEY";
    case StoreOp::kAppend: return "APPEND";
    case StoreOp::kMultiGet: return "MULTI_GET";
    case StoreOp::kMultiSet: return "MULTI_SET";
    case StoreOp::kCancelWait: return "CANCEL_WAIT";
    case StoreOp::kPing: return "PING";
  }
  return "?";
}

void DropAttemptPrefix(StoreRequest& req) {
  static constexpr std::string_view kPrefix = "/worker/attempt_";
  for (std::string& key : req.keys) {
    // TCPStore's clients send every key behind a "/" of their own.
    const size_t at = !key.empty() && key[0] == '/' && key.compare(1, kPrefix.size(), kPrefix) == 0 ? 1 : 0;
    if (key.compare(at, kPrefix.size(), kPrefix) != 0) continue;
    const size_t digits = at + kPrefix.size();
    size_t end = digits;
    while (end < key.size() && key[end] >= '0' && key[end] <= '9') ++end;
    if (end == digits || end >= key.size() || key[end] != '/') continue;
    key.erase(digits - 1, end - (digits - 1));  // keep "/worker/attempt", drop "_<digits>"
  }
}

}  // namespace ctrun::rdzv
