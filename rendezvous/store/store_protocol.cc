#include "rendezvous/store/store_protocol.h"

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
  Reader(std::string_view bytes, const StoreLimits& limits) : bytes_(bytes), limits_(limits) {}

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
    if (pos_ + n > limits_.max_request_bytes) {
      error = Status::InvalidArgument("a request over " + std::to_string(limits_.max_request_bytes) +
                                      " bytes");
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

  size_t pos() const { return pos_; }
  Status error;

 private:
  std::string_view bytes_;
  const StoreLimits& limits_;
  size_t pos_ = 0;
};

// Decodes the arguments of `op`. False: incomplete, or r.error is set.
bool ReadArgs(Reader& r, StoreRequest& req) {
  switch (req.op) {
    case StoreOp::kValidate: {
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
      req.keys.resize(1);
      req.values.resize(1);
      return r.Key(req.keys[0]) && r.Val(req.values[0]);
    case StoreOp::kCompareSet:
      req.keys.resize(1);
      req.values.resize(2);
      return r.Key(req.keys[0]) && r.Val(req.values[0]) && r.Val(req.values[1]);
    case StoreOp::kGet:
    case StoreOp::kDeleteKey:
      req.keys.resize(1);
      return r.Key(req.keys[0]);
    case StoreOp::kAdd:
      req.keys.resize(1);
      return r.Key(req.keys[0]) && r.Value(req.number);
    case StoreOp::kCheck:
    case StoreOp::kWait:
    case StoreOp::kMultiGet: {
      uint64_t n = 0;
      if (!r.Count(n)) return false;
      for (uint64_t i = 0; i < n; ++i) {
        if (!r.Key(req.keys.emplace_back())) return false;
      }
      return true;
    }
    case StoreOp::kMultiSet: {
      uint64_t n = 0;
      if (!r.Count(n)) return false;
      for (uint64_t i = 0; i < n; ++i) {
        if (!r.Key(req.keys.emplace_back()) || !r.Val(req.values.emplace_back())) return false;
      }
      return true;
    }
    case StoreOp::kNumKeys:
    case StoreOp::kCancelWait:
      return true;
    case StoreOp::kPing: {
      uint32_t nonce = 0;
      if (!r.Value(nonce)) return false;
      req.number = nonce;
      return true;
    }
  }
  return true;
}

}  // namespace

void StoreParser::Feed(const void* data, size_t size) {
  if (!failed_.ok()) return;
  // Consumed bytes are dropped lazily, so a stream of small requests does not
  // move the buffer on every one.
  if (consumed_ > 0 && (consumed_ == buffer_.size() || consumed_ > 65536)) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(static_cast<const char*>(data), size);
}

Result<std::optional<StoreRequest>> StoreParser::Next() {
  if (!failed_.ok()) return failed_;
  const std::string_view rest(buffer_.data() + consumed_, buffer_.size() - consumed_);
  if (rest.empty()) return std::optional<StoreRequest>();
  const uint8_t type = static_cast<uint8_t>(rest[0]);

  StoreDialect dialect = dialect_;
  if (dialect == StoreDialect::kUnknown) {
    if (type == 0 && rest.size() < 5) return std::optional<StoreRequest>();
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
  StoreRequest req;
  req.op = *op;
  Reader r(rest.substr(1), limits_);
  if (!ReadArgs(r, req)) {
    if (r.error.ok()) return std::optional<StoreRequest>();
    failed_ = Status::InvalidArgument(std::string(StoreOpName(*op)) + ": " + r.error.message());
    return failed_;
  }
  dialect_ = dialect;
  consumed_ += 1 + r.pos();
  return std::optional<StoreRequest>(std::move(req));
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
    const size_t at = key.compare(0, 1 + kPrefix.size(), std::string("/").append(kPrefix)) == 0 ? 1 : 0;
    if (key.compare(at, kPrefix.size(), kPrefix) != 0) continue;
    const size_t digits = at + kPrefix.size();
    size_t end = digits;
    while (end < key.size() && key[end] >= '0' && key[end] <= '9') ++end;
    if (end == digits || end >= key.size() || key[end] != '/') continue;
    key.erase(digits - 1, end - (digits - 1));  // keep "/worker/attempt", drop "_<digits>"
  }
}

}  // namespace ctrun::rdzv
