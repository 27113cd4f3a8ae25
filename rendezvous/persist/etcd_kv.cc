#include "rendezvous/persist/etcd_kv.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace ctrun::rdzv {

namespace pb = ::etcdserverpb;

namespace {

// etcd's "require leader": a member without a leader fails the call at once.
void Prepare(grpc::ClientContext& ctx, std::optional<Duration> timeout) {
  ctx.AddMetadata("hasleader", "true");
  if (timeout) ctx.set_deadline(std::chrono::system_clock::now() + *timeout);
}

bool Retryable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

// "http://127.0.0.1:2379" -> "127.0.0.1:2379".
std::string HostPort(const std::string& url) {
  size_t scheme = url.find("://");
  std::string hp = scheme == std::string::npos ? url : url.substr(scheme + 3);
  while (!hp.empty() && hp.back() == '/') hp.pop_back();
  return hp;
}

std::string PrefixEnd(std::string prefix) {
  for (size_t i = prefix.size(); i-- > 0;) {
    if (static_cast<unsigned char>(prefix[i]) < 0xff) {
      ++prefix[i];
      return prefix.substr(0, i + 1);
    }
  }
  return std::string(1, '\0');
}

}  // namespace

class EtcdKv::Impl {
 public:
  Impl(Duration call_timeout) : call_timeout_(call_timeout) {}

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      if (watch_ctx_) watch_ctx_->TryCancel();
      cv_.notify_all();
    }
    if (watcher_.joinable()) watcher_.join();
  }

  void Add(const std::string& endpoint) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Endpoint& e : endpoints_) {
      if (e.address == endpoint) return;
    }
    grpc::ChannelArguments args;
    // As the rendezvous clients (rendezvous/grpc/client/channel_backoff.h): a
    // refused connection retried after 100 ms, up to 1 s; each attempt may
    // take 10 s (gRPC's connect timeout is GRPC_ARG_MIN_RECONNECT_BACKOFF_MS).
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 10'000);
    // A frozen member (SIGSTOP, a dead host) leaves the watch stream silent:
    // pings find it within ~15 s. etcd refuses pings more often than every 5 s.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    auto channel = grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
    endpoints_.push_back(Endpoint{endpoint, pb::KV::NewStub(channel), pb::Lease::NewStub(channel),
                                  pb::Watch::NewStub(channel), pb::Cluster::NewStub(channel)});
  }

  // Runs `call(endpoint)` on the current endpoint, moving on to the next one
  // after a retryable failure.
  template <typename Call>
  grpc::Status Try(Call call) {
    size_t n, start;
    {
      std::lock_guard<std::mutex> lock(mu_);
      n = endpoints_.size();
      start = current_;
    }
    grpc::Status s;
    for (size_t attempt = 0; attempt < 2 * n; ++attempt) {
      const size_t i = (start + attempt) % n;
      s = call(endpoints_[i]);
      if (!Retryable(s)) {
        std::lock_guard<std::mutex> lock(mu_);
        current_ = i;
        return s;
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    current_ = (start + 1) % n;
    return s;
  }

  Status ToStatus(const grpc::Status& s, const std::string& what) const {
    if (s.ok()) return Status::Ok();
    std::string names;
    for (const std::string& e : Endpoints()) names += (names.empty() ? "" : ",") + e;
    std::string msg = "etcd (" + names + ") " + what + ": " + s.error_message();
    if (s.error_code() == grpc::StatusCode::NOT_FOUND) return Status::NotFound(msg);
    return Status::Unavailable(msg + " (check that a majority of the etcd members is up and reachable)");
  }

  std::vector<std::string> Endpoints() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const Endpoint& e : endpoints_) out.push_back(e.address);
    return out;
  }

  struct Endpoint {
    std::string address;
    std::unique_ptr<pb::KV::Stub> kv;
    std::unique_ptr<pb::Lease::Stub> lease;
    std::unique_ptr<pb::Watch::Stub> watch;
    std::unique_ptr<pb::Cluster::Stub> cluster;
  };

  void WatchLoop(std::string prefix, std::function<void(const std::string&, bool)> on_event) {
    int64_t next_revision = 0;
    size_t index = 0;
    for (;;) {
      grpc::ClientContext ctx;
      Prepare(ctx, std::nullopt);
      pb::Watch::Stub* stub;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;
        watch_ctx_ = &ctx;
        stub = endpoints_[index % endpoints_.size()].watch.get();
      }
      auto stream = stub->Watch(&ctx);
      pb::WatchRequest req;
      pb::WatchCreateRequest* create = req.mutable_create_request();
      create->set_key(prefix);
      create->set_range_end(PrefixEnd(prefix));
      if (next_revision > 0) create->set_start_revision(next_revision);
      pb::WatchResponse resp;
      bool announced = false;
      if (stream->Write(req)) {
        while (stream->Read(&resp)) {
          if (resp.canceled() || resp.compact_revision() > 0) break;
          if (resp.created() && !announced) {
            announced = true;
            on_event("", false);
          }
          for (const auto& ev : resp.events()) {
            next_revision = std::max(next_revision, ev.kv().mod_revision() + 1);
            on_event(ev.kv().key(), ev.type() == ::mvccpb::Event::DELETE);
          }
          if (resp.header().revision() >= next_revision && resp.events_size() == 0 && !resp.created()) {
            next_revision = resp.header().revision() + 1;
          }
        }
      }
      ctx.TryCancel();
      stream->Finish();
      std::unique_lock<std::mutex> lock(mu_);
      watch_ctx_ = nullptr;
      if (stopping_) return;
      ++index;
      cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stopping_; });
    }
  }

  const Duration call_timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Endpoint> endpoints_;  // only appended to; entries never move once Connect returns
  size_t current_ = 0;
  bool stopping_ = false;
  grpc::ClientContext* watch_ctx_ = nullptr;
  std::thread watcher_;
};

Result<std::unique_ptr<EtcdKv>> EtcdKv::Connect(const std::vector<std::string>& endpoints, Duration call_timeout) {
  auto impl = std::make_unique<Impl>(call_timeout);
  for (const std::string& e : endpoints) impl->Add(e);
  pb::MemberListResponse members;
  grpc::Status s = impl->Try([&](Impl::Endpoint& e) {
    grpc::ClientContext ctx;
    Prepare(ctx, call_timeout);
    members.Clear();
    return e.cluster->MemberList(&ctx, pb::MemberListRequest(), &members);
  });
  if (!s.ok()) return impl->ToStatus(s, "is unreachable");
  for (const auto& m : members.members()) {
    for (const std::string& url : m.clienturls()) impl->Add(HostPort(url));
  }
  return std::unique_ptr<EtcdKv>(new EtcdKv(std::move(impl)));
}

EtcdKv::EtcdKv(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EtcdKv::~EtcdKv() = default;

Result<std::optional<EtcdValue>> EtcdKv::Get(const std::string& key) {
  pb::RangeResponse resp;
  grpc::Status s = impl_->Try([&](Impl::Endpoint& e) {
    grpc::ClientContext ctx;
    Prepare(ctx, impl_->call_timeout_);
    pb::RangeRequest req;
    req.set_key(key);
    return e.kv->Range(&ctx, req, &resp);
  });
  if (!s.ok()) return impl_->ToStatus(s, "did not answer a read of " + key);
  if (resp.kvs_size() == 0) return std::optional<EtcdValue>();
  return std::optional<EtcdValue>(EtcdValue{resp.kvs(0).value(), resp.kvs(0).mod_revision()});
}

Result<std::vector<std::string>> EtcdKv::Keys(const std::string& prefix) {
  pb::RangeResponse resp;
  grpc::Status s = impl_->Try([&](Impl::Endpoint& e) {
    grpc::ClientContext ctx;
    Prepare(ctx, impl_->call_timeout_);
    pb::RangeRequest req;
    req.set_key(prefix);
    req.set_range_end(PrefixEnd(prefix));
    req.set_keys_only(true);
    return e.kv->Range(&ctx, req, &resp);
  });
  if (!s.ok()) return impl_->ToStatus(s, "did not answer a read of " + prefix + "*");
  std::vector<std::string> keys;
  for (const auto& kv : resp.kvs()) keys.push_back(kv.key());
  return keys;
}

Result<bool> EtcdKv::CompareAndSwap(const std::string& key, const std::string& value, int64_t expected) {
  pb::TxnResponse resp;
  grpc::Status s = impl_->Try([&](Impl::Endpoint& e) {
    grpc::ClientContext ctx;
    Prepare(ctx, impl_->call_timeout_);
    pb::TxnRequest req;
    pb::Compare* cmp = req.add_compare();
    cmp->set_key(key);
    cmp->set_target(pb::Compare::MOD);
    cmp->set_result(pb::Compare::EQUAL);
    cmp->set_mod_revision(expected);
    pb::PutRequest* put = req.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(value);
    return e.kv->Txn(&ctx, req, &resp);
  });
  if (!s.ok()) return impl_->ToStatus(s, "did not answer a write of " + key);
  return resp.succeeded();
}

Result<int64_t> EtcdKv::GrantLease(Duration ttl) {
  const int64_t seconds = std::max<int64_t>(
      2, std::chrono::duration_cast<std::chrono::seconds>(ttl + std::chrono::seconds(1) - Duration(1)).count());
  pb::LeaseGrantResponse resp;
  grpc::Status s = impl_->Try([&](Impl::Endpoint& e) {
    grpc::ClientContext ctx;
    Prepare(ctx, impl_->call_timeout_);
    pb::LeaseGrantRequest req;
    req.set_ttl(seconds);
    return e.lease->LeaseGrant(&ctx, req, &resp);
  });
  if (!s.ok()) return impl_->ToStatus(s, "granted no lease");
  return resp.id();
}

Status EtcdKv::PutWithLease(const std::string& key, const std::string& value, int64_t lease) {
  grpc::Status s = impl_->Try([&](Impl::Endpoint& e) {
    grpc::ClientContext ctx;
    Prepare(ctx, impl_->call_timeout_);
    pb::PutRequest req;
    req.set_key(key);
    req.set_value(value);
    req.set_lease(lease);
    pb::PutResponse resp;
    return e.kv->Put(&ctx, req, &resp);
  });
  return impl_->ToStatus(s, "did not answer a write of " + key);
}

Status EtcdKv::KeepAlive(int64_t lease) {
  bool expired = false;
  grpc::Status s = impl_->Try([&](Impl::Endpoint& e) {
    grpc::ClientContext ctx;
    Prepare(ctx, impl_->call_timeout_);
    auto stream = e.lease->LeaseKeepAlive(&ctx);
    pb::LeaseKeepAliveRequest req;
    req.set_id(lease);
    pb::LeaseKeepAliveResponse resp;
    bool got = stream->Write(req) && stream->Read(&resp);
    stream->WritesDone();
    if (got) {
      expired = resp.ttl() <= 0;
      ctx.TryCancel();
    }
    grpc::Status fin = stream->Finish();
    return got ? grpc::Status::OK : (fin.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "no reply") : fin);
  });
  if (s.ok() && expired) return Status::NotFound("etcd lease expired");
  return impl_->ToStatus(s, "did not renew a lease");
}

Status EtcdKv::Revoke(int64_t lease) {
  grpc::Status s = impl_->Try([&](Impl::Endpoint& e) {
    grpc::ClientContext ctx;
    Prepare(ctx, impl_->call_timeout_);
    pb::LeaseRevokeRequest req;
    req.set_id(lease);
    pb::LeaseRevokeResponse resp;
    return e.lease->LeaseRevoke(&ctx, req, &resp);
  });
  return impl_->ToStatus(s, "did not revoke a lease");
}

void EtcdKv::Watch(const std::string& prefix, std::function<void(const std::string&, bool)> on_event) {
  impl_->watcher_ = std::thread([impl = impl_.get(), prefix, on_event = std::move(on_event)] {
    impl->WatchLoop(prefix, on_event);
  });
}

std::vector<std::string> EtcdKv::endpoints() const { return impl_->Endpoints(); }

}  // namespace ctrun::rdzv
