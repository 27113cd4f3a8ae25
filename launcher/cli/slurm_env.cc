#include "launcher/cli/slurm_env.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "launcher/cli/hostlist.h"
#include "launcher/cli/text.h"

extern char** environ;

namespace ctrun::launcher {
namespace {

constexpr int kRdzvBasePort = 29400;
constexpr int kRdzvPortSpread = 100;
constexpr std::string_view kTorchrunSignals = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";

std::optional<uint64_t> ParseUnsigned(std::string_view s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string FirstLine(std::string_view text) {
  size_t nl = text.find('\n');
  return std::string(text.substr(0, nl));
}

class SystemResolver final : public NodeAddressResolver {
 public:
  bool Resolves(const std::string& name) const override {
    unsigned char buf[sizeof(in6_addr)];
    if (::inet_pton(AF_INET, name.c_str(), buf) == 1 || ::inet_pton(AF_INET6, name.c_str(), buf) == 1) {
      return true;
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &found);
    if (found != nullptr) ::freeaddrinfo(found);
    return rc == 0;
  }

  Result<std::string> NodeAddr(const std::string& name) const override {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      return Status::Unavailable(fmt::format("cannot run scontrol: pipe: {}", std::strerror(errno)));
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
    std::string prog = "scontrol", show = "show", node = "node";
    std::string arg = name;
    char* argv[] = {prog.data(), show.data(), node.data(), arg.data(), nullptr};
    pid_t pid = -1;
    int err = ::posix_spawnp(&pid, "scontrol", &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (err != 0) {
      ::close(fds[0]);
      return Status::Unavailable(fmt::format("cannot run scontrol: {}", std::strerror(err)));
    }
    std::string output;
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n > 0) {
        output.append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        break;
      }
    }
    ::close(fds[0]);
    int wstatus = 0;
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
      return Status::Unavailable(fmt::format("`scontrol show node {}` failed: {}", name, FirstLine(output)));
    }
    return NodeAddrFromScontrol(output);
  }
};

}  // namespace

const NodeAddressResolver& SystemNodeAddressResolver() {
  static const SystemResolver resolver;
  return resolver;
}

Result<std::string> NodeAddrFromScontrol(std::string_view output) {
  constexpr std::string_view kKey = "NodeAddr=";
  for (size_t at = output.find(kKey); at != std::string_view::npos; at = output.find(kKey, at + 1)) {
    if (at != 0 && !std::isspace(static_cast<unsigned char>(output[at - 1]))) continue;
    size_t start = at + kKey.size();
    size_t end = start;
    while (end < output.size() && !std::isspace(static_cast<unsigned char>(output[end]))) ++end;
    if (end > start) return std::string(output.substr(start, end - start));
  }
  return Status::NotFound("no NodeAddr in scontrol's output");
}

std::optional<SlurmEnv> SlurmEnv::Detect(const Environment& env, const NodeAddressResolver& resolver) {
  SlurmEnv s(env, resolver);
  if (s.Get("CTRUN_IGNORE_SLURM") == "1") return std::nullopt;
  if (!s.Get("SLURM_JOB_ID") || !s.Get("SLURM_STEP_ID")) return std::nullopt;
  if (!s.Get("SLURM_STEP_NUM_NODES") && !s.Get("SLURM_NNODES") && !s.Get("SLURM_JOB_NUM_NODES")) {
    return std::nullopt;
  }
  return s;
}

std::optional<std::string> SlurmEnv::Get(std::string_view name) const {
  auto it = env_->find(std::string(name));
  if (it == env_->end()) return std::nullopt;
  return it->second;
}

Result<uint64_t> SlurmEnv::Id(std::string_view name) const {
  std::string v = Get(name).value_or("");
  auto n = ParseUnsigned(v);
  if (!n) {
    return Status::InvalidArgument(fmt::format(
        "{} '{}': not a Slurm id (a number; run ctrun with srun inside the job, or set --rdzv-id)", name, Quote(v)));
  }
  return *n;
}

Result<SlurmDefault> SlurmEnv::Nodes() const {
  for (std::string_view name : {"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"}) {
    auto v = Get(name);
    if (!v) continue;
    auto n = ParseUnsigned(*v);
    if (!n || *n == 0 || *n > 1'000'000) {
      return Status::InvalidArgument(fmt::format(
          "{} '{}': not a node count (Slurm sets a positive integer; give --nnodes to override)", name, Quote(*v)));
    }
    return SlurmDefault{std::to_string(*n), std::string(name)};
  }
  return Status::Internal("SlurmEnv without a node count");
}

Result<std::optional<SlurmDefault>> SlurmEnv::Nproc() const {
  auto positive = [](std::string_view name, const std::string& v) -> Result<uint64_t> {
    auto n = ParseUnsigned(v);
    if (!n || *n > 1'000'000) {
      return Status::InvalidArgument(fmt::format(
          "{} '{}': not a count (expected an integer >= 0; give --nproc-per-node to override)", name, Quote(v)));
    }
    return *n;
  };
  if (auto v = Get("SLURM_GPUS_ON_NODE")) {
    auto n = positive("SLURM_GPUS_ON_NODE", *v);
    if (!n.ok()) return n.status();
    if (*n > 0) return std::optional<SlurmDefault>(SlurmDefault{std::to_string(*n), "SLURM_GPUS_ON_NODE"});
  }
  if (auto v = Get("CUDA_VISIBLE_DEVICES"); v && !v->empty() && *v != "NoDevFiles") {
    size_t count = 1;
    for (char c : *v) count += c == ',' ? 1 : 0;
    return std::optional<SlurmDefault>(SlurmDefault{std::to_string(count), "CUDA_VISIBLE_DEVICES"});
  }
  if (auto v = Get("SLURM_CPUS_PER_TASK")) {
    auto n = positive("SLURM_CPUS_PER_TASK", *v);
    if (!n.ok()) return n.status();
    if (*n > 0) return std::optional<SlurmDefault>(SlurmDefault{std::to_string(*n), "SLURM_CPUS_PER_TASK"});
  }
  return std::optional<SlurmDefault>();
}

Result<SlurmDefault> SlurmEnv::NodeRank(int nnodes) const {
  std::string v = Get("SLURM_NODEID").value_or("");
  auto n = ParseUnsigned(v);
  if (!n) {
    return Status::InvalidArgument(fmt::format(
        "SLURM_NODEID '{}': not a node id (srun sets 0..N-1; run ctrun with srun, or give --node-rank)", Quote(v)));
  }
  if (*n >= static_cast<uint64_t>(nnodes)) {
    return Status::InvalidArgument(fmt::format(
        "SLURM_NODEID '{}': must be below the step's node count {} (use 0..{}; run ctrun with srun, or give "
        "--node-rank)",
        Quote(v), nnodes, nnodes - 1));
  }
  return SlurmDefault{std::to_string(*n), "SLURM_NODEID"};
}

Result<SlurmDefault> SlurmEnv::FirstHostAddress() const {
  for (std::string_view name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    auto v = Get(name);
    if (!v) continue;
    auto hosts = ExpandHostlist(*v);
    if (!hosts.ok()) return Status::InvalidArgument(fmt::format("{} '{}': {}", name, Quote(*v), hosts.status().message()));
    auto nodes = Nodes();
    if (!nodes.ok()) return nodes.status();
    if (std::to_string(hosts->size()) != nodes->value) {
      return Status::InvalidArgument(fmt::format(
          "{} '{}': lists {} hosts but {} is {} (run ctrun with srun inside the job, or give --rdzv-endpoint)",
          name, Quote(*v), hosts->size(), nodes->source, nodes->value));
    }
    const std::string& first = hosts->front();
    if (resolver_->Resolves(first)) return SlurmDefault{first, std::string(name)};
    auto addr = resolver_->NodeAddr(first);
    if (!addr.ok()) {
      return Status::InvalidArgument(fmt::format(
          "{} '{}': first host '{}' does not resolve and has no NodeAddr ({}) (add the node names to DNS or "
          "/etc/hosts, or give --rdzv-endpoint HOST:PORT)",
          name, Quote(*v), Quote(first), addr.status().message()));
    }
    return SlurmDefault{*addr, std::string(name)};
  }
  return Status::InvalidArgument(
      "SLURM_JOB_NODELIST is not set (run ctrun with srun inside the job, or give --rdzv-endpoint HOST:PORT)");
}

Result<std::optional<SlurmDefault>> SlurmEnv::LocalAddress() const {
  auto name = Get("SLURMD_NODENAME");
  if (!name || name->empty() || resolver_->Resolves(*name)) return std::optional<SlurmDefault>();
  auto addr = resolver_->NodeAddr(*name);
  if (!addr.ok()) {
    return Status::InvalidArgument(fmt::format(
        "SLURMD_NODENAME '{}': does not resolve and has no NodeAddr ({}) (add the node names to DNS or "
        "/etc/hosts, or give --local-addr)",
        Quote(*name), addr.status().message()));
  }
  return std::optional<SlurmDefault>(SlurmDefault{*addr, "SLURMD_NODENAME"});
}

Result<std::optional<SlurmDefault>> SlurmEnv::DefaultFor(
    std::string_view flag, const LaunchConfig& so_far, const std::map<std::string_view, std::string>& user) const {
  using Out = std::optional<SlurmDefault>;
  auto given = [&](std::string_view f) { return user.count(f) != 0; };
  auto standalone = user.find("--standalone");
  const bool single = standalone != user.end() && standalone->second == "1";
  const bool multi = !single && so_far.max_nodes > 1;

  if (flag == "--nproc-per-node") return Nproc();
  if (flag == "--signals-to-handle") return Out(SlurmDefault{std::string(kTorchrunSignals) + ",SIGUSR1", "SLURM_STEP_ID"});
  if (single) return Out();
  if (flag == "--nnodes") {
    auto nodes = Nodes();
    if (!nodes.ok()) return nodes.status();
    for (std::string_view name : {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}) {
      auto v = Get(name);
      if (!v) continue;
      auto tasks = ParseUnsigned(*v);
      if (tasks && *tasks > std::stoull(nodes->value)) {
        return Status::InvalidArgument(fmt::format(
            "{} '{}': srun started {} ctrun tasks on {} nodes; ctrun starts the workers itself and wants one task "
            "per node (use srun --ntasks-per-node=1 ctrun ..., or give --nnodes)",
            name, *v, *tasks, nodes->value));
      }
      break;
    }
    return Out(*nodes);
  }
  if (flag == "--rdzv-id") {
    auto job = Id("SLURM_JOB_ID");
    if (!job.ok()) return job.status();
    auto step = Id("SLURM_STEP_ID");
    if (!step.ok()) return step.status();
    return Out(SlurmDefault{fmt::format("{}.{}", *job, *step), "SLURM_JOB_ID"});
  }
  if (!multi) return Out();
  if (flag == "--rdzv-backend") {
    if (given("--master-addr") || given("--master-port")) return Out();
    return Out(SlurmDefault{"c10d", "SLURM_JOB_ID"});
  }
  if (flag == "--rdzv-endpoint") {
    if (so_far.rdzv_backend != RdzvBackend::kC10d) return Out();
    auto host = FirstHostAddress();
    if (!host.ok()) return host.status();
    auto job = Id("SLURM_JOB_ID");
    if (!job.ok()) return job.status();
    auto step = Id("SLURM_STEP_ID");
    if (!step.ok()) return step.status();
    int port = kRdzvBasePort + static_cast<int>((*job + *step) % kRdzvPortSpread);
    const bool v6 = host->value.find(':') != std::string::npos;
    std::string endpoint = v6 ? fmt::format("[{}]:{}", host->value, port) : fmt::format("{}:{}", host->value, port);
    return Out(SlurmDefault{std::move(endpoint), host->source});
  }
  if (flag == "--node-rank") {
    auto nodes = Nodes();
    if (!nodes.ok()) return nodes.status();
    auto rank = NodeRank(std::stoi(nodes->value));
    if (!rank.ok()) return rank.status();
    // With a smaller --nnodes from the user the Slurm node id is no rank of theirs.
    if (std::stoi(rank->value) >= so_far.max_nodes) return Out();
    return Out(*rank);
  }
  if (flag == "--master-addr") {
    if (so_far.rdzv_backend != RdzvBackend::kStatic) return Out();
    auto host = FirstHostAddress();
    if (!host.ok()) return host.status();
    return Out(*host);
  }
  if (flag == "--local-addr") return LocalAddress();
  return Out();
}

}  // namespace ctrun::launcher
