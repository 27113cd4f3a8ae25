// ParseCommandLine refuses bad input with one plain line that names the
// input and the fix (the good inputs are in config_test.cc).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <string>
#include <vector>

#include "launcher/cli/config.h"

namespace ctrun::launcher {
namespace {

using Args = std::vector<std::string>;

std::string BadInputMessage(const Args& args, const Environment& env = {}) {
  auto r = ParseCommandLine(args, env);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().IsInvalidArgument());
  return r.status().message();
}

struct BadCase {
  Args args;
  Environment env;
  std::string message;  // exact substring
};

// Every case is refused as invalid with one line holding its message.
void CheckBad(const std::vector<BadCase>& cases) {
  for (const BadCase& c : cases) {
    INFO("args: " << fmt::format("{}", fmt::join(c.args, " ")));
    std::string msg = BadInputMessage(c.args, c.env);
    CHECK_THAT(msg, Catch::Contains(c.message));
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("bad inputs are rejected with a one-line message naming input and fix: node and process counts, restarts and intervals",
          "[config]") {
  CheckBad({
      {{"--nnodes", "0", "t.py"}, {}, "--nnodes '0': node counts must be positive (use N or MIN:MAX"},
      {{"--nnodes", "3:2", "t.py"}, {}, "--nnodes '3:2': MIN must not exceed MAX (use MIN:MAX with 0 < MIN <= MAX)"},
      {{"--nnodes", "abc", "t.py"}, {}, "--nnodes 'abc': not a node count"},
      {{"--nnodes", "1:", "t.py"}, {}, "--nnodes '1:': not a node count"},
      {{"--nnodes", ":2", "t.py"}, {}, "--nnodes ':2': not a node count"},
      {{"--nnodes", "1:2:3", "t.py"}, {}, "--nnodes '1:2:3': not a node count"},
      {{"--nproc-per-node", "-1", "t.py"}, {}, "--nproc-per-node '-1': must be a positive integer, auto, cpu or gpu"},
      {{"--nproc_per_node", "0", "t.py"}, {}, "--nproc_per_node '0': must be a positive integer"},
      {{"--nproc-per-node", "x", "t.py"}, {}, "--nproc-per-node 'x': must be a positive integer"},
      {{"--nproc-per-node", "xpu", "t.py"}, {}, "--nproc-per-node 'xpu': ctrun supports NVIDIA GPUs only"},
      {{"--max-restarts", "-1", "t.py"}, {}, "--max-restarts '-1': must be an integer >= 0"},
      {{"--monitor-interval", "0", "t.py"}, {}, "--monitor-interval '0': must be a number of seconds > 0"},
      {{"--monitor-interval", "nan", "t.py"}, {}, "--monitor-interval 'nan': must be a number of seconds > 0"},
  });
}

TEST_CASE("bad inputs are rejected with a one-line message naming input and fix: stream selections and local rank filters",
          "[config]") {
  CheckBad({
      {{"-r", "4", "t.py"}, {}, "-r '4': '4' is not a stream selection (use 0-3, or a map"},
      {{"--redirects", "0:4", "t.py"}, {}, "--redirects '0:4': '0:4' is not a stream selection"},
      {{"--tee", "10:1", "t.py"}, {}, "--tee '10:1': '10:1' is not a stream selection"},
      {{"-t", "0:1,", "t.py"}, {}, "-t '0:1,': '' is not a stream selection"},
      {{"--local-ranks-filter", "a", "t.py"}, {}, "--local-ranks-filter 'a': 'a' is not a local rank"},
      {{"--local-ranks-filter", "0,-1", "t.py"}, {}, "'-1' is not a local rank (use a comma list of integers >= 0"},
      {{"--local_ranks_filter", "0,,1", "t.py"}, {}, "--local_ranks_filter '0,,1': '' is not a local rank"},
  });
}

TEST_CASE("bad inputs are rejected with a one-line message naming input and fix: rendezvous backends and endpoints",
          "[config]") {
  CheckBad({
      {{"--rdzv-backend", "zookeeper", "t.py"}, {}, "--rdzv-backend 'zookeeper': unknown backend (use static, c10d"},
      {{"--rdzv-endpoint", "h:-1", "t.py"}, {}, "--rdzv-endpoint 'h:-1': port must be an integer from 0 to 65535"},
      {{"--rdzv-endpoint", "h:65536", "t.py"}, {}, "port must be an integer from 0 to 65535"},
      {{"--rdzv-endpoint", "h:http", "t.py"}, {}, "port must be an integer from 0 to 65535"},
      {{"--rdzv-endpoint", "::1:29400", "t.py"}, {}, "an IPv6 address needs brackets (use HOST[:PORT] or [IPV6]:PORT)"},
      {{"--rdzv-endpoint", "[::1", "t.py"}, {}, "missing ']'"},
      {{"--rdzv-endpoint", "a b:1", "t.py"}, {}, "'a b' is not a host name or address"},
      {{"--rdzv-endpoint", "h", "t.py"}, {}, "--rdzv-endpoint 'h': the static backend needs a port (use HOST:PORT"},
  });
}

TEST_CASE("bad inputs are rejected with a one-line message naming input and fix: --rdzv-conf keys and values",
          "[config]") {
  CheckBad({
      {{"--rdzv-conf", "foo=1", "t.py"}, {}, "--rdzv-conf 'foo=1': unknown key 'foo' (use only: join_timeout"},
      {{"--rdzv-conf", "=1", "t.py"}, {}, "--rdzv-conf '=1': empty key (use KEY=VALUE,KEY=VALUE)"},
      {{"--rdzv-conf", "join_timeout=1,,rank=2", "t.py"}, {}, "empty key"},
      {{"--rdzv-conf", "join_timeout= ", "t.py"}, {}, "key 'join_timeout' has no value (use join_timeout=VALUE)"},
      {{"--rdzv-conf", "read_timeout", "t.py"}, {}, "key 'read_timeout' has no value"},
      {{"--rdzv-conf", "join_timeout=0", "t.py"}, {}, "join_timeout: must be a number of seconds > 0"},
      {{"--rdzv-conf", "last_call_timeout=-5", "t.py"}, {}, "last_call_timeout: must be a number of seconds > 0"},
      {{"--rdzv-conf", "is_host=maybe", "t.py"}, {}, "is_host: must be a boolean (use 1/true/t/yes/y or 0/false/f/no/n)"},
      {{"--rdzv-conf", "store_type=redis", "t.py"}, {}, "store_type: must be tcp or file"},
      {{"--rdzv-conf", "keep_alive_max_attempt=0", "t.py"}, {}, "keep_alive_max_attempt: must be a positive integer"},
      {{"--rdzv-conf", "metrics_port=65536", "t.py"},
       {},
       "--rdzv-conf 'metrics_port=65536': metrics_port: must be a port 0..65535 (0 picks a free one, e.g. 9400)"},
      {{"--rdzv-conf", "metrics_port=-1", "t.py"}, {}, "metrics_port: must be a port 0..65535"},
      {{"--rdzv-conf", "metrics_port=http", "t.py"}, {}, "metrics_port: must be a port 0..65535"},
  });
}

TEST_CASE("bad inputs are rejected with a one-line message naming input and fix: choices, signals, ports, node ranks and script modes",
          "[config]") {
  CheckBad({
      {{"--start-method", "thread", "t.py"}, {}, "--start-method 'thread': not a valid choice (use one of: spawn, fork, forkserver)"},
      {{"--signals-to-handle", "SIGKILL", "t.py"}, {}, "'SIGKILL' is not a signal ctrun forwards"},
      {{"--signals-to-handle", "TERM,foo", "t.py"}, {}, "'foo' is not a signal ctrun forwards"},
      {{"--signals-to-handle", "", "t.py"}, {}, "'' is not a signal ctrun forwards"},
      {{"--master-port", "0", "t.py"}, {}, "--master-port '0': port must be an integer from 1 to 65535"},
      {{"--master-port", "65536", "t.py"}, {}, "port must be an integer from 1 to 65535"},
      {{"--node-rank", "-1", "t.py"}, {}, "--node-rank '-1': must be an integer >= 0"},
      {{"--node-rank", "2", "--nnodes", "2", "t.py"},
       {},
       "--node-rank '2': must be less than the maximum node count 2 from --nnodes '2' (use 0..1, or raise --nnodes)"},
      {{"--node-rank", "1", "t.py"}, {}, "from --nnodes (default '1:1')"},
      {{"--logs-specs", "default", "t.py"}, {}, "--logs-specs 'default': ctrun has no logs-specs plugins"},
      {{"--numa-binding", "gpu", "t.py"}, {}, "--numa-binding 'gpu': not a valid choice (use one of: node, socket"},
      {{"--no-python", "-m", "t.py"}, {}, "--no-python and -m cannot be used together"},
      {{"--run-path", "t.py"}, {}, "--run-path: script 't.py' must be an absolute path"},
      {{"--exit-barrier-timeout", "0", "t.py"}, {}, "--exit-barrier-timeout '0': must be a number of seconds > 0"},
      {{"--preempt-grace", "0", "t.py"}, {}, "--preempt-grace '0': must be a number of seconds > 0 (e.g. 120)"},
      {{"--preempt-grace", "soon", "t.py"}, {}, "--preempt-grace 'soon': must be a number of seconds > 0"},
      {{"--preempt-signal", "USR1", "t.py"}, {},
       "--preempt-signal 'USR1' needs --preempt-grace SECONDS: the time the workers get to save"},
      {{"--preempt-signal", "KILL", "--preempt-grace", "9", "t.py"}, {},
       "--preempt-signal 'KILL': give one signal ctrun can catch: SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 or SIGUSR2"},
      {{"--preempt-signal", "USR1,USR2", "--preempt-grace", "9", "t.py"}, {},
       "--preempt-signal 'USR1,USR2': give one signal ctrun can catch"},
  });
}

TEST_CASE("bad inputs are rejected with a one-line message naming input and fix: run ids and node names",
          "[config]") {
  CheckBad({
      {{"--rdzv-id", "", "t.py"}, {}, "--rdzv-id '': run id must not be empty"},
      {{"--rdzv-id", std::string(129, 'j'), "t.py"}, {},
       "': a run id is at most 128 bytes, this one has 129 (give a shorter id, e.g. --rdzv-id job42)"},
      {{"--rdzv-id", "adv\xff", "t.py"}, {}, "--rdzv-id 'adv\\xff': a run id must be UTF-8 text, byte 3 is not"},
      {{"--rdzv-id", "a\tb", "t.py"}, {}, "--rdzv-id 'a\\x09b': a run id must not hold control characters, byte 1"},
      {{"--rdzv-id", "a\xc2\x85" "b", "t.py"}, {}, "a run id must not hold control characters, byte 1 is one"},
      {{"t.py"}, {{"PET_RDZV_ID", "x\xc0\xafy"}}, "PET_RDZV_ID 'x\\xc0\\xafy': a run id must be UTF-8 text"},
      {{"--local-addr", "n\x1b[31m", "t.py"}, {}, "--local-addr 'n\\x1b[31m': a node name must not hold control"},
      {{"--local-addr", std::string(254, 'n'), "t.py"}, {}, "a node name is at most 253 bytes, this one has 254"},
      {{"t.py"}, {{"PET_LOCAL_ADDR", "\xed\xa0\x80"}}, "PET_LOCAL_ADDR '\\xed\\xa0\\x80': a node name must be UTF-8"},
  });
}

TEST_CASE("bad inputs are rejected with a one-line message naming input and fix: unknown flags, missing values and a missing script",
          "[config]") {
  CheckBad({
      {{"--nproc-per-nodes", "2", "t.py"}, {}, "unknown flag '--nproc-per-nodes' (did you mean --nproc-per-node?"},
      {{"--nproc_per_nodes=2", "t.py"}, {}, "unknown flag '--nproc_per_nodes' (did you mean --nproc_per_node?"},
      {{"--nprocs", "2", "t.py"}, {}, "unknown flag '--nprocs' (did you mean --nproc-per-node? see ctrun --help)"},
      {{"--rdzv", "c10d", "t.py"}, {}, "ambiguous flag '--rdzv' could match --rdzv-backend, --rdzv-endpoint, --rdzv-id, --rdzv-conf (write more of it)"},
      {{"--rdzv_", "c10d", "t.py"}, {}, "ambiguous flag '--rdzv_' could match --rdzv_backend, --rdzv_endpoint, --rdzv_id, --rdzv_conf (write more of it)"},
      {{"-n", "2", "t.py"}, {}, "unknown flag '-n'"},  // short flags are exact
      {{"--zzzzzzzzzzzzzzzz", "t.py"}, {}, "unknown flag '--zzzzzzzzzzzzzzzz' (see ctrun --help"},
      {{"-x", "t.py"}, {}, "unknown flag '-x'"},
      {{"--nnodes"}, {}, "--nnodes expects a value (write --nnodes MIN:MAX or --nnodes=MIN:MAX)"},
      {{"--nnodes", "--standalone", "t.py"}, {}, "--nnodes expects a value"},
      {{"--standalone=1", "t.py"}, {}, "--standalone takes no value (write just --standalone)"},
      {{}, {}, "missing the training script (usage: ctrun [OPTIONS] SCRIPT [SCRIPT_ARGS...]"},
      {{"--nnodes", "2"}, {}, "missing the training script"},
      {{"--"}, {}, "missing the training script"},
  });
}

TEST_CASE("bad inputs are rejected with a one-line message naming input and fix: PET_ switches, shutdown timeouts, filters, handlers and the environment",
          "[config]") {
  CheckBad({
      {{"t.py"}, {{"PET_NNODES", "0"}}, "PET_NNODES '0': node counts must be positive"},
      {{"t.py"}, {{"PET_STANDALONE", "true"}},
       "PET_STANDALONE 'true': must be an integer, 0 for off or any other for on (e.g. PET_STANDALONE=1 turns "
       "--standalone on)"},
      {{"t.py"}, {{"PET_MODULE", ""}}, "PET_MODULE '': must be an integer"},
      {{"t.py"}, {{"PET_VIRTUAL_LOCAL_RANK", "1.0"}}, "PET_VIRTUAL_LOCAL_RANK '1.0': must be an integer"},
      {{"t.py"}, {{"PET_NO_PYTHON", "1__0"}}, "PET_NO_PYTHON '1__0': must be an integer"},
      {{"--virtual-local-rank=1", "t.py"}, {}, "--virtual-local-rank takes no value"},
      {{"--shutdown-timeout", "1.5", "t.py"}, {}, "--shutdown-timeout '1.5': must be a whole number of seconds >= 0 (e.g. 60)"},
      {{"--shutdown-timeout", "-1", "t.py"}, {}, "--shutdown-timeout '-1': must be a whole number of seconds >= 0"},
      {{"t.py"}, {{"PET_SHUTDOWN_TIMEOUT", "soon"}}, "PET_SHUTDOWN_TIMEOUT 'soon': must be a whole number"},
      {{"--duplicate-stdout-filters"}, {}, "--duplicate-stdout-filters expects a value (write --duplicate-stdout-filters TEXT,..."},
      {{"--event-log-handler", "syslog", "t.py"}, {},
       "--event-log-handler 'syslog': not a valid choice (use one of: null, console, dynamic_rendezvous)"},
      {{"t.py"}, {{"PET_EVENT_LOG_HANDLER", "file"}}, "PET_EVENT_LOG_HANDLER 'file': not a valid choice"},
      {{"t.py"}, {{"PET_NO_PYTHON", "1"}, {"PET_MODULE", "1"}}, "PET_NO_PYTHON and PET_MODULE cannot be used together"},
      {{"t.py"}, {{"PET_RDZV_CONF", "bogus=1"}}, "PET_RDZV_CONF 'bogus=1': unknown key 'bogus'"},
      {{"t.py"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "abc"}}, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT 'abc': must be a number of seconds >= 0"},
      {{"t.py"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "-1"}}, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT '-1'"},
  });
}

TEST_CASE("an error line quotes at most ~200 bytes of what the user gave", "[config]") {
  const std::string huge(100000, 'x');
  for (std::string flag : {"--rdzv-id", "--nnodes", "--rdzv-endpoint", "--local-addr", "--rdzv-conf"}) {
    INFO(flag);
    const std::string msg = BadInputMessage({flag, huge, "t.py"}, {});
    CHECK_THAT(msg, Catch::Contains(flag + " 'xxx"));
    CHECK_THAT(msg, Catch::Contains("(100000 bytes)'"));
    CHECK(msg.size() < 600);
  }
  CHECK(BadInputMessage({"--" + huge, "t.py"}, {}).size() < 600);
  CHECK(BadInputMessage({"t.py"}, {{"PET_RDZV_ID", huge}}).size() < 600);
}

}  // namespace
}  // namespace ctrun::launcher
