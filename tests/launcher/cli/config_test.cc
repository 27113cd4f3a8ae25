#include "launcher/cli/config.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <map>
#include <string>
#include <vector>

#include "launcher/cli/flag_values.h"
#include "launcher/cli/flags.h"

namespace ctrun::launcher {
namespace {

using Args = std::vector<std::string>;

std::string Opt(const std::optional<std::string>& v) { return v ? *v : "unset"; }

std::string Streams(const StreamSelection& s) {
  std::string out = fmt::format("{}", s.all);
  for (const auto& [rank, v] : s.per_rank) out += fmt::format(" {}:{}", rank, v);
  return out;
}

// Every field of `c`, one "name=value" line each, so tests compare whole
// configs and look for single lines.
// Each item in single quotes, so [] and [''] differ.
std::string Quoted(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& i : items) out += fmt::format("{}'{}'", out.empty() ? "" : " ", i);
  return out;
}

std::string Dump(const LaunchConfig& c) {
  const RdzvConf& r = c.rdzv_conf;
  std::string given;
  for (const auto& [k, v] : r.given) given += fmt::format("{}={};", k, v);
  std::string signals;
  for (int s : c.signals_to_handle) signals += fmt::format("{},", s);
  std::string filter = "unset";
  if (c.local_ranks_filter) {
    filter.clear();
    for (int rank : *c.local_ranks_filter) filter += fmt::format("{},", rank);
  }
  std::string args;
  for (const std::string& a : c.script_args) args += fmt::format("[{}]", a);
  const char* backends[] = {"static", "c10d", "etcd", "etcd-v2", "etcd-v3"};
  const char* kinds[] = {"number", "auto", "cpu", "gpu"};
  return fmt::format(
             "nnodes={}:{}\nnproc={}:{}\nrdzv_backend={}\nrdzv_endpoint={}\nrdzv_host={}\nrdzv_port={}\n"
             "rdzv_id={}\nrdzv_conf=join:{} last_call:{} close:{} heartbeat:{} keep_alive:{}x{} read:{} "
             "timeout:{} is_host:{} store:{} libuv:{} token:{} given:{}\nrdzv_metrics_port={}\n",
             c.min_nodes, c.max_nodes, kinds[static_cast<int>(c.nproc_kind)], c.nproc_per_node,
             backends[static_cast<int>(c.rdzv_backend)], c.rdzv_endpoint, c.rdzv_host, c.rdzv_port,
             c.standalone ? "<random>" : c.rdzv_id,
             r.join_timeout.count(), r.last_call_timeout.count(), r.close_timeout.count(),
             r.heartbeat_timeout.count(), r.keep_alive_interval.count(), r.keep_alive_max_attempt,
             r.read_timeout.count(), r.timeout.count(), r.is_host ? (*r.is_host ? "1" : "0") : "unset",
             r.store_type, r.use_libuv, Opt(r.token_file), given,
             r.metrics_port ? std::to_string(*r.metrics_port) : "unset") +
         fmt::format(
             "standalone={}\nnode_rank={}\nnode_rank_given={}\nmaster_addr={}\nmaster_port={}\nmaster_port_given={}\n"
             "local_addr={}\nmax_restarts={}\nmonitor_interval={}\nstart_method={}\nsignals={}\n"
             "shutdown_grace={}\nexit_barrier_timeout={}\nexit_code_from_root_cause={}\n",
             c.standalone, c.node_rank, c.node_rank_given, c.master_addr, c.master_port, c.master_port_given, Opt(c.local_addr),
             c.max_restarts, c.monitor_interval.count(), c.start_method, signals, c.shutdown_grace.count(),
             c.exit_barrier_timeout.count(), c.exit_code_from_root_cause) +
         fmt::format(
             "role={}\nmodule={}\nno_python={}\nrun_path={}\npython_exec={}\nscript={}\nscript_args={}\n"
             "log_dir={}\nredirects={}\ntee={}\nlocal_ranks_filter={}\nlogs_specs={}\nnuma_binding={}\n"
             "event_log_handler={}\nlog_line_prefix_template={}\n",
             c.role, c.module, c.no_python, c.run_path, c.python_exec, c.script, args, Opt(c.log_dir),
             Streams(c.redirects), Streams(c.tee), filter, Opt(c.logs_specs), Opt(c.numa_binding),
             Opt(c.event_log_handler), c.log_line_prefix_template) +
         fmt::format("heartbeat={} initial={}\n", c.heartbeat_timeout.count(),
                     c.heartbeat_initial_timeout ? c.heartbeat_initial_timeout->count() : -1.0) +
         fmt::format("no_agent_store={}\nevents_file={}\n", c.no_agent_store, Opt(c.events_file)) +
         fmt::format("restart_backoff={}\nmin_healthy_uptime={}\nfail_fast_on_startup={}\nkill_timeout={}\n"
                     "hang_stacks_timeout={}\n",
                     c.restart_backoff.count(), c.min_healthy_uptime.count(), c.fail_fast_on_startup,
                     c.kill_timeout.count(), c.hang_stacks_timeout.count()) +
         fmt::format("health_check={}\nhealth_check_timeout={}\nhealth_check_interval={}\nmax_unhealthy={}\n",
                     Opt(c.health_check), c.health_check_timeout.count(), c.health_check_interval.count(),
                     c.max_unhealthy_nodes ? *c.max_unhealthy_nodes : -1) +
         fmt::format("straggler_factor={}\nstraggler_intervals={}\n", c.straggler_factor, c.straggler_intervals) +
         fmt::format("virtual_local_rank={}\nshutdown_timeout_given={}\nduplicate_stdout_filters=[{}]\n"
                     "duplicate_stderr_filters=[{}]\n",
                     c.virtual_local_rank, c.shutdown_timeout_given, Quoted(c.duplicate_stdout_filters),
                     Quoted(c.duplicate_stderr_filters));
}

LaunchConfig Good(const Args& args, const Environment& env = {}) {
  auto r = ParseCommandLine(args, env);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  REQUIRE(r->action == ParseAction::kRun);
  return r->config;
}

std::string Bad(const Args& args, const Environment& env = {}) {
  auto r = ParseCommandLine(args, env);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().IsInvalidArgument());
  return r.status().message();
}

bool HasLine(const std::string& dump, const std::string& line) {
  return dump.find("\n" + line + "\n") != std::string::npos || dump.rfind(line + "\n", 0) == 0;
}

TEST_CASE("defaults match torchrun's", "[config]") {
  std::string d = Dump(Good({"train.py"}));
  for (const char* line :
       {"nnodes=1:1", "nproc=number:1", "rdzv_backend=static", "rdzv_endpoint=", "rdzv_host=127.0.0.1",
        "rdzv_port=29500", "rdzv_id=none", "standalone=false", "node_rank=0", "node_rank_given=false", "master_port_given=false",
        "local_addr=unset", "max_restarts=0", "monitor_interval=0.1", "start_method=spawn", "signals=15,2,1,3,",
        "shutdown_grace=30", "exit_barrier_timeout=300", "exit_code_from_root_cause=false", "role=default",
        "module=false", "no_python=false", "run_path=false", "script=train.py", "script_args=", "no_agent_store=false",
        "log_dir=unset", "redirects=0", "tee=0", "local_ranks_filter=unset", "logs_specs=unset",
        "numa_binding=unset", "event_log_handler=null", "log_line_prefix_template=",
        "rdzv_conf=join:600 last_call:30 close:30 heartbeat:5 keep_alive:5x3 read:60 timeout:900 "
        "is_host:unset store:tcp libuv:true token:unset given:"}) {
    INFO(d);
    CHECK(HasLine(d, line));
  }
}

struct GoodCase {
  Args args;
  Environment env;
  std::vector<std::string> lines;
};

TEST_CASE("good inputs fill the expected fields", "[config]") {
  const std::vector<GoodCase> cases = {
      {{"--nnodes", "2", "t.py"}, {}, {"nnodes=2:2"}},
      {{"--nnodes=1:4", "t.py"}, {}, {"nnodes=1:4"}},
      {{"--nproc-per-node", "4", "t.py"}, {}, {"nproc=number:4"}},
      {{"--nproc_per_node=auto", "t.py"}, {}, {"nproc=auto:1"}},
      {{"--nproc-per-node", "cpu", "t.py"}, {}, {"nproc=cpu:1"}},
      {{"--nproc-per-node", "gpu", "t.py"}, {}, {"nproc=gpu:1"}},
      {{"-r", "3", "-t1", "t.py"}, {}, {"redirects=3", "tee=1"}},
      {{"-r=2", "--tee=0:1,3:3", "t.py"}, {}, {"redirects=2", "tee=0 0:1 3:3"}},
      {{"--redirects", "0:1,1:2,0:3", "t.py"}, {}, {"redirects=0 0:3 1:2"}},
      {{"--local-ranks-filter", "3, 0", "t.py"}, {}, {"local_ranks_filter=0,3,"}},
      {{"--local-ranks-filter", "", "t.py"}, {}, {"local_ranks_filter=unset"}},
      {{"--rdzv-backend", "c10d", "t.py"}, {}, {"rdzv_backend=c10d", "rdzv_host=localhost", "rdzv_port=29400"}},
      {{"--rdzv-backend", "c10d", "--rdzv-endpoint", "node1", "t.py"}, {}, {"rdzv_host=node1", "rdzv_port=29400"}},
      {{"--rdzv-backend=grpc", "--rdzv-endpoint=node1:1234", "t.py"},
       {},
       {"rdzv_backend=c10d", "rdzv_endpoint=node1:1234", "rdzv_host=node1", "rdzv_port=1234"}},
      {{"--rdzv-backend", "c10d", "--rdzv-endpoint", "[::1]:5000", "t.py"}, {}, {"rdzv_host=::1", "rdzv_port=5000"}},
      {{"--rdzv-backend", "c10d", "--rdzv-endpoint", "[fe80::1]", "t.py"}, {}, {"rdzv_host=fe80::1", "rdzv_port=29400"}},
      {{"--rdzv-backend", "etcd", "--rdzv-endpoint", "e1", "t.py"}, {}, {"rdzv_backend=etcd", "rdzv_port=2379"}},
      {{"--rdzv-backend", "etcd-v2", "t.py"}, {}, {"rdzv_backend=etcd-v2"}},
      {{"--rdzv-backend", "etcd-v3", "t.py"}, {}, {"rdzv_backend=etcd-v3"}},
      {{"--master-addr", "10.0.0.1", "--master-port", "1234", "t.py"},
       {},
       {"rdzv_host=10.0.0.1", "rdzv_port=1234", "master_port=1234", "master_port_given=true"}},
      {{"--rdzv-endpoint", "h:99", "t.py"}, {}, {"rdzv_backend=static", "rdzv_host=h", "rdzv_port=99"}},
      {{"--rdzv-conf", " join_timeout = 10 ,is_host=yes,store_type=FILE,use_libuv=0,token_file=/t,rank=1,"
                       "timeout=5,read_timeout=1.5,keep_alive_max_attempt=7,last_call_timeout=2,close_timeout=3,"
                       "heartbeat_timeout=4,keep_alive_interval=0.5",
        "t.py"},
       {},
       {"rdzv_conf=join:10 last_call:2 close:3 heartbeat:4 keep_alive:0.5x7 read:1.5 timeout:5 is_host:1 "
        "store:file libuv:false token:/t given:close_timeout=3;heartbeat_timeout=4;is_host=yes;join_timeout=10;"
        "keep_alive_interval=0.5;keep_alive_max_attempt=7;last_call_timeout=2;rank=1;read_timeout=1.5;"
        "store_type=FILE;timeout=5;token_file=/t;use_libuv=0;"}},
      {{"--rdzv-conf", "is_host=F", "t.py"}, {}, {"rdzv_conf=join:600 last_call:30 close:30 heartbeat:5 "
                                                 "keep_alive:5x3 read:60 timeout:900 is_host:0 store:tcp "
                                                 "libuv:true token:unset given:is_host=F;"}},
      {{"--rdzv-conf", "metrics_port=0", "t.py"}, {}, {"rdzv_metrics_port=0"}},
      {{"--rdzv-conf", "metrics_port=65535,is_host=1", "t.py"}, {}, {"rdzv_metrics_port=65535"}},
      {{"t.py"}, {}, {"rdzv_metrics_port=unset"}},
      {{"--signals-to-handle", "term, SIGusr1,INT,SIGTERM", "t.py"},
       {},
       {fmt::format("signals={},{},{},", SIGTERM, SIGUSR1, SIGINT)}},
      {{"--signals_to_handle=SIGHUP,SIGQUIT,SIGUSR2", "t.py"},
       {},
       {fmt::format("signals={},{},{},", SIGHUP, SIGQUIT, SIGUSR2)}},
      {{"--node-rank", "3", "--nnodes", "2:4", "t.py"}, {}, {"node_rank=3"}},
      {{"--max-restarts", "5", "--monitor-interval", ".5", "t.py"}, {}, {"max_restarts=5", "monitor_interval=0.5"}},
      {{"--start-method", "forkserver", "--role", "trainer", "t.py"}, {}, {"start_method=forkserver", "role=trainer"}},
      {{"--numa-binding", "core-complex", "t.py"}, {}, {"numa_binding=core-complex"}},
      {{"--log-dir", "/tmp/logs", "--local-addr", "n1", "t.py"}, {}, {"log_dir=/tmp/logs", "local_addr=n1"}},
      {{"--event-log-handler", "console", "t.py"}, {}, {"event_log_handler=console"}},
      {{"-m", "pkg.train"}, {}, {"module=true", "script=pkg.train"}},
      {{"--no-python", "/bin/echo", "hi"}, {}, {"no_python=true", "script=/bin/echo", "script_args=[hi]"}},
      {{"--run-path", "--no-python", "-m", "/abs/t.py"}, {}, {"run_path=true", "no_python=true", "module=true"}},
      {{"--exit-code-from-root-cause", "--exit-barrier-timeout", "12.5", "t.py"},
       {},
       {"exit_code_from_root_cause=true", "exit_barrier_timeout=12.5"}},
      {{"t.py"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "2.5"}}, {"shutdown_grace=2.5", "shutdown_timeout_given=false"}},
      // --shutdown-timeout and PET_SHUTDOWN_TIMEOUT win over TORCH_ELASTIC_SHUTDOWN_TIMEOUT (torch's launcher).
      {{"--shutdown-timeout", "45", "t.py"},
       {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "2.5"}},
       {"shutdown_grace=45", "shutdown_timeout_given=true"}},
      {{"t.py"}, {{"PET_SHUTDOWN_TIMEOUT", "0"}, {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "9"}}, {"shutdown_grace=0"}},
      // The variable is not read when the flag is given, as in torch.
      {{"--shutdown_timeout=7", "t.py"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "soon"}}, {"shutdown_grace=7"}},
      {{"--virtual-local-rank", "t.py"}, {}, {"virtual_local_rank=true"}},
      {{"t.py"}, {{"PET_VIRTUAL_LOCAL_RANK", "1"}}, {"virtual_local_rank=true"}},
      // torch's comma_separated_list: ",," is a literal comma; "" is the one empty filter.
      {{"--duplicate-stdout-filters", "loss,acc,,top1", "t.py"}, {}, {"duplicate_stdout_filters=['loss' 'acc,top1']"}},
      {{"--duplicate_stderr_filters=", "t.py"}, {}, {"duplicate_stderr_filters=['']", "duplicate_stdout_filters=[]"}},
      {{"t.py"}, {{"PET_DUPLICATE_STDERR_FILTERS", "WARN,ERR,"}}, {"duplicate_stderr_filters=['WARN' 'ERR' '']"}},
      {{"--event-log-handler", "dynamic_rendezvous", "t.py"}, {}, {"event_log_handler=dynamic_rendezvous"}},
      {{"t.py"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "0"}}, {"shutdown_grace=0"}},
      {{"t.py"},
       {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[${role_name}${rank}]:"}},
       {"log_line_prefix_template=[${role_name}${rank}]:"}},
      {{"--", "t.py", "--x"}, {}, {"script=t.py", "script_args=[--x]"}},
      {{"--nnodes", "2", "--", "-weird.py"}, {}, {"script=-weird.py"}},
  };
  for (const GoodCase& c : cases) {
    std::string d = Dump(Good(c.args, c.env));
    for (const std::string& line : c.lines) {
      INFO(fmt::format("args: {}\n{}", fmt::join(c.args, " "), d));
      CHECK(HasLine(d, line));
    }
  }
}

struct BadCase {
  Args args;
  Environment env;
  std::string message;  // exact substring
};

TEST_CASE("bad inputs are rejected with a one-line message naming input and fix", "[config]") {
  const std::vector<BadCase> cases = {
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
      {{"-r", "4", "t.py"}, {}, "-r '4': '4' is not a stream selection (use 0-3, or a map"},
      {{"--redirects", "0:4", "t.py"}, {}, "--redirects '0:4': '0:4' is not a stream selection"},
      {{"--tee", "10:1", "t.py"}, {}, "--tee '10:1': '10:1' is not a stream selection"},
      {{"-t", "0:1,", "t.py"}, {}, "-t '0:1,': '' is not a stream selection"},
      {{"--local-ranks-filter", "a", "t.py"}, {}, "--local-ranks-filter 'a': 'a' is not a local rank"},
      {{"--local-ranks-filter", "0,-1", "t.py"}, {}, "'-1' is not a local rank (use a comma list of integers >= 0"},
      {{"--local_ranks_filter", "0,,1", "t.py"}, {}, "--local_ranks_filter '0,,1': '' is not a local rank"},
      {{"--rdzv-backend", "zookeeper", "t.py"}, {}, "--rdzv-backend 'zookeeper': unknown backend (use static, c10d"},
      {{"--rdzv-endpoint", "h:-1", "t.py"}, {}, "--rdzv-endpoint 'h:-1': port must be an integer from 0 to 65535"},
      {{"--rdzv-endpoint", "h:65536", "t.py"}, {}, "port must be an integer from 0 to 65535"},
      {{"--rdzv-endpoint", "h:http", "t.py"}, {}, "port must be an integer from 0 to 65535"},
      {{"--rdzv-endpoint", "::1:29400", "t.py"}, {}, "an IPv6 address needs brackets (use HOST[:PORT] or [IPV6]:PORT)"},
      {{"--rdzv-endpoint", "[::1", "t.py"}, {}, "missing ']'"},
      {{"--rdzv-endpoint", "a b:1", "t.py"}, {}, "'a b' is not a host name or address"},
      {{"--rdzv-endpoint", "h", "t.py"}, {}, "--rdzv-endpoint 'h': the static backend needs a port (use HOST:PORT"},
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
      {{"--nproc-per-nodes", "2", "t.py"}, {}, "unknown flag '--nproc-per-nodes' (did you mean --nproc-per-node?"},
      {{"--nproc_per_nod=2", "t.py"}, {}, "unknown flag '--nproc_per_nod' (did you mean --nproc_per_node?"},
      {{"--zzzzzzzzzzzzzzzz", "t.py"}, {}, "unknown flag '--zzzzzzzzzzzzzzzz' (see ctrun --help"},
      {{"-x", "t.py"}, {}, "unknown flag '-x'"},
      {{"--nnodes"}, {}, "--nnodes expects a value (write --nnodes MIN:MAX or --nnodes=MIN:MAX)"},
      {{"--nnodes", "--standalone", "t.py"}, {}, "--nnodes expects a value"},
      {{"--standalone=1", "t.py"}, {}, "--standalone takes no value (write just --standalone)"},
      {{}, {}, "missing the training script (usage: ctrun [OPTIONS] SCRIPT [SCRIPT_ARGS...]"},
      {{"--nnodes", "2"}, {}, "missing the training script"},
      {{"--"}, {}, "missing the training script"},
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
  };
  for (const BadCase& c : cases) {
    INFO("args: " << fmt::format("{}", fmt::join(c.args, " ")));
    std::string msg = Bad(c.args, c.env);
    CHECK_THAT(msg, Catch::Contains(c.message));
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("good run ids and node names pass: UTF-8, up to the limit", "[config]") {
  const std::string utf8 = "ex\xc3\xa9" "cution-\xe2\x82\xac";
  for (const std::string& id : {std::string("job-42_a.b"), std::string(128, 'j'), utf8}) {
    auto parsed = ParseCommandLine({"--rdzv-id", id, "--local-addr", std::string(253, 'n'), "t.py"}, {});
    REQUIRE(parsed.ok());
    CHECK(parsed->config.rdzv_id == id);
  }
}

TEST_CASE("an error line quotes at most ~200 bytes of what the user gave", "[config]") {
  const std::string huge(100000, 'x');
  for (std::string flag : {"--rdzv-id", "--nnodes", "--rdzv-endpoint", "--local-addr", "--rdzv-conf"}) {
    INFO(flag);
    const std::string msg = Bad({flag, huge, "t.py"}, {});
    CHECK_THAT(msg, Catch::Contains(flag + " 'xxx"));
    CHECK_THAT(msg, Catch::Contains("(100000 bytes)'"));
    CHECK(msg.size() < 600);
  }
  CHECK(Bad({"--" + huge, "t.py"}, {}).size() < 600);
  CHECK(Bad({"t.py"}, {{"PET_RDZV_ID", huge}}).size() < 600);
}

TEST_CASE("explicit flag beats PET_ which beats the default", "[config]") {
  struct Case {
    std::string flag, env, flag_value, env_value, line_default, line_env, line_flag;
  };
  const std::vector<Case> cases = {
      {"--nnodes", "PET_NNODES", "3", "2:5", "nnodes=1:1", "nnodes=2:5", "nnodes=3:3"},
      {"--nproc-per-node", "PET_NPROC_PER_NODE", "4", "auto", "nproc=number:1", "nproc=auto:1", "nproc=number:4"},
      {"--max-restarts", "PET_MAX_RESTARTS", "7", "2", "max_restarts=0", "max_restarts=2", "max_restarts=7"},
      {"--rdzv-id", "PET_RDZV_ID", "flag", "env", "rdzv_id=none", "rdzv_id=env", "rdzv_id=flag"},
      {"--master-port", "PET_MASTER_PORT", "1111", "2222", "master_port=29500", "master_port=2222",
       "master_port=1111"},
      {"--redirects", "PET_REDIRECTS", "1", "2", "redirects=0", "redirects=2", "redirects=1"},
  };
  for (const Case& c : cases) {
    INFO(c.flag);
    Environment env = {{c.env, c.env_value}};
    CHECK(HasLine(Dump(Good({"t.py"})), c.line_default));
    CHECK(HasLine(Dump(Good({"t.py"}, env)), c.line_env));
    CHECK(HasLine(Dump(Good({c.flag, c.flag_value, "t.py"}, env)), c.line_flag));
  }
  // A bad PET_ value does not matter when the flag is given (it is never read).
  CHECK(Good({"--nnodes", "2", "t.py"}, {{"PET_NNODES", "0"}}).max_nodes == 2);
  CHECK(HasLine(Dump(Good({"t.py"}, {{"PET_MASTER_PORT", "2222"}})), "master_port_given=true"));
  CHECK(HasLine(Dump(Good({"t.py"}, {{"PET_NODE_RANK", "0"}})), "node_rank_given=true"));
  CHECK(HasLine(Dump(Good({"--node-rank", "0", "t.py"})), "node_rank_given=true"));
}

TEST_CASE("chk switches read PET_ 1 and 0 and the flag turns them on", "[config]") {
  CHECK(Good({"t.py"}, {{"PET_EXIT_CODE_FROM_ROOT_CAUSE", "1"}}).exit_code_from_root_cause);
  CHECK_FALSE(Good({"t.py"}, {{"PET_EXIT_CODE_FROM_ROOT_CAUSE", "0"}}).exit_code_from_root_cause);
  CHECK(Good({"--module", "t"}, {{"PET_MODULE", "0"}}).module);
  CHECK(Good({"t"}, {{"PET_MODULE", "1"}}).module);
}

TEST_CASE("PET_ switches are read as torchrun's bool(int(value))", "[config]") {
  for (const char* on : {"1", "2", "-1", " 1 ", "+7", "1_000", "0010"}) {
    INFO(on);
    CHECK(Good({"t.py"}, {{"PET_VIRTUAL_LOCAL_RANK", on}}).virtual_local_rank);
  }
  for (const char* off : {"0", "00", "-0", " 0\t", "0_0"}) {
    INFO(off);
    CHECK_FALSE(Good({"t.py"}, {{"PET_VIRTUAL_LOCAL_RANK", off}}).virtual_local_rank);
  }
  for (const char* bad : {"", "true", "yes", "1.0", "0x1", "_1", "1_", "1__0", "+", "1 0"}) {
    INFO(bad);
    CHECK_THAT(Bad({"t.py"}, {{"PET_STANDALONE", bad}}), Catch::Contains("must be an integer"));
  }
}

TEST_CASE("everything after the script goes to the script unchanged", "[config]") {
  LaunchConfig c = Good({"--nproc-per-node", "2", "train.py", "--lr", "0.1", "-m", "--nnodes", "0", "--", "${local_rank}"});
  CHECK(c.script == "train.py");
  CHECK(c.script_args == Args{"--lr", "0.1", "-m", "--nnodes", "0", "--", "${local_rank}"});
  CHECK_FALSE(c.module);
  CHECK(c.max_nodes == 1);
  CHECK(Good({"train.py", "--help"}).script_args == Args{"--help"});
  CHECK(Good({"--", "train.py", "--version"}).script_args == Args{"--version"});
  // The last of a repeated flag wins, as with argparse.
  CHECK(Good({"--nnodes", "2", "--nnodes", "3", "t.py"}).max_nodes == 3);
}

// A valid, non-default value per flag for the spelling loop; a row without
// one fails the test, so a new flag needs an entry here.
const std::map<std::string_view, std::string> kSample = {
    {"--nnodes", "2:3"},          {"--nproc-per-node", "5"},         {"--rdzv-backend", "c10d"},
    {"--rdzv-endpoint", "h:123"}, {"--rdzv-id", "job"},              {"--rdzv-conf", "join_timeout=9"},
    {"--node-rank", "0"},         {"--master-addr", "10.1.1.1"},     {"--master-port", "1234"},
    {"--local-addr", "n7"},       {"--max-restarts", "3"},           {"--monitor-interval", "2"},
    {"--start-method", "fork"},   {"--event-log-handler", "console"}, {"--role", "r"},
    {"--signals-to-handle", "SIGUSR1"}, {"--numa-binding", "node"},  {"--log-dir", "/l"},
    {"--redirects", "3"},         {"--tee", "0:2"},                  {"--local-ranks-filter", "1"},
    {"--logs-specs", "x"},        {"--exit-barrier-timeout", "1"},
    {"--heartbeat-timeout", "3"}, {"--heartbeat-initial-timeout", "40"},
    {"--events-file", "/e.jsonl"},  {"--shutdown-timeout", "45"},
    {"--duplicate-stdout-filters", "a,b"}, {"--duplicate-stderr-filters", "c"},
    {"--restart-backoff", "5"}, {"--min-healthy-uptime", "120"}, {"--kill-timeout", "10"},
    {"--hang-stacks-timeout", "5"},
    {"--health-check", "/c.sh"}, {"--health-check-timeout", "7"}, {"--health-check-interval", "30"},
    {"--max-unhealthy-nodes", "2"},
    {"--straggler-factor", "2.5"}, {"--straggler-intervals", "7"},
};

TEST_CASE("every spelling of every flag in the table works as --f v and --f=v and PET_", "[config][flags]") {
  const std::string base = Dump(Good({"/abs/t.py"}));
  for (const FlagSpec& flag : Flags()) {
    INFO(flag.name);
    if (flag.kind == FlagKind::kAction) {
      for (std::string_view s : flag.spellings) {
        auto r = ParseCommandLine({std::string(s), "t.py"}, {});
        REQUIRE(r.ok());
        CHECK(r->action == (flag.name == "--help" ? ParseAction::kHelp : ParseAction::kVersion));
        CHECK_FALSE(r->text.empty());
      }
      continue;
    }
    REQUIRE(FindFlag(flag.name) == &flag);
    if (flag.kind == FlagKind::kSwitch) {
      const std::string on = Dump(Good({std::string(flag.name), "/abs/t.py"}));
      CHECK(on != base);
      for (std::string_view s : flag.spellings) CHECK(Dump(Good({std::string(s), "/abs/t.py"})) == on);
      if (!flag.env.empty()) CHECK(Dump(Good({"/abs/t.py"}, {{std::string(flag.env), "1"}})) == on);
      continue;
    }
    auto sample = kSample.find(flag.name);
    REQUIRE(sample != kSample.end());
    const std::string& v = sample->second;
    if (flag.name == "--logs-specs") {
      for (std::string_view s : flag.spellings) {
        CHECK_THAT(Bad({std::string(s), v, "t.py"}), Catch::Contains("no logs-specs plugins"));
      }
      continue;
    }
    const std::string expected = Dump(Good({std::string(flag.name), v, "/abs/t.py"}));
    if (flag.name != "--node-rank") CHECK(expected != base);
    for (std::string_view s : flag.spellings) {
      INFO(s);
      CHECK(Dump(Good({std::string(s), v, "/abs/t.py"})) == expected);
      CHECK(Dump(Good({fmt::format("{}={}", s, v), "/abs/t.py"})) == expected);
      if (s.size() == 2) CHECK(Dump(Good({fmt::format("{}{}", s, v), "/abs/t.py"})) == expected);
    }
    if (!flag.env.empty()) CHECK(Dump(Good({"/abs/t.py"}, {{std::string(flag.env), v}})) == expected);
  }
}

// xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx, lower-case hex.
bool IsUuid4(const std::string& s) {
  const std::string shape = "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx";
  if (s.size() != shape.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    bool hex = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
    if (shape[i] == 'x' && !hex) return false;
    if (shape[i] == 'y' && std::string("89ab").find(s[i]) == std::string::npos) return false;
    if ((shape[i] == '-' || shape[i] == '4') && s[i] != shape[i]) return false;
  }
  return true;
}

TEST_CASE("standalone forces c10d on localhost:0 with a fresh uuid4 run id", "[config]") {
  auto r = ParseCommandLine({"--standalone", "t.py"}, {});
  REQUIRE(r.ok());
  const LaunchConfig& c = r->config;
  CHECK(c.rdzv_backend == RdzvBackend::kC10d);
  CHECK(c.rdzv_endpoint == "localhost:0");
  CHECK(c.rdzv_host == "localhost");
  CHECK(c.rdzv_port == 0);
  CHECK(IsUuid4(c.rdzv_id));
  CHECK(r->warnings.empty());
  auto again = ParseCommandLine({"--standalone", "t.py"}, {});
  CHECK(again->config.rdzv_id != c.rdzv_id);

  auto overridden = ParseCommandLine({"--standalone", "--rdzv-endpoint", "h:1", "--rdzv-backend", "etcd", "t.py"},
                                     {{"PET_RDZV_ID", "mine"}});
  REQUIRE(overridden.ok());
  CHECK(overridden->config.rdzv_endpoint == "localhost:0");
  CHECK(overridden->config.rdzv_backend == RdzvBackend::kC10d);
  REQUIRE(overridden->warnings.size() == 3);
  CHECK_THAT(overridden->warnings[0], Catch::Contains("--standalone ignores --rdzv-backend 'etcd'"));
  CHECK_THAT(overridden->warnings[1], Catch::Contains("--standalone ignores --rdzv-endpoint 'h:1'"));
  CHECK_THAT(overridden->warnings[2], Catch::Contains("--standalone ignores PET_RDZV_ID 'mine'"));
  CHECK(Good({"t.py"}, {{"PET_STANDALONE", "1"}}).standalone);
}

TEST_CASE("IsUuid4 accepts only version-4 uuids", "[config]") {
  CHECK(IsUuid4("0f1e2d3c-4b5a-4987-a654-3210fedcba98"));
  CHECK_FALSE(IsUuid4("0f1e2d3c-4b5a-3987-a654-3210fedcba98"));
  CHECK_FALSE(IsUuid4("0f1e2d3c-4b5a-4987-c654-3210fedcba98"));
  CHECK_FALSE(IsUuid4("0F1E2D3C-4b5a-4987-a654-3210fedcba98"));
}

TEST_CASE("CTRUN_HEALTH_CHECK reads like PET_HEALTH_CHECK and the flag wins, and the health defaults",
          "[config]") {
  LaunchConfig d = Good({"/abs/t.py"});
  CHECK_FALSE(d.health_check.has_value());
  CHECK(d.health_check_timeout.count() == 60);
  CHECK(d.health_check_interval.count() == 0);
  CHECK_FALSE(d.max_unhealthy_nodes.has_value());
  CHECK(Good({"/abs/t.py"}, {{"CTRUN_HEALTH_CHECK", "/a.sh"}}).health_check == std::optional<std::string>("/a.sh"));
  CHECK(Good({"/abs/t.py"}, {{"CTRUN_HEALTH_CHECK", "/a.sh"}, {"PET_HEALTH_CHECK", "/b.sh"}}).health_check ==
        std::optional<std::string>("/b.sh"));
  CHECK(Good({"--health-check", "/c.sh", "/abs/t.py"}, {{"CTRUN_HEALTH_CHECK", "/a.sh"}}).health_check ==
        std::optional<std::string>("/c.sh"));
}

TEST_CASE("CurrentEnvironment snapshots environ", "[config]") {
  ::setenv("CTRUN_CONFIG_TEST_VAR", "a=b", 1);
  Environment env = CurrentEnvironment();
  ::unsetenv("CTRUN_CONFIG_TEST_VAR");
  CHECK(env.at("CTRUN_CONFIG_TEST_VAR") == "a=b");
  CHECK(CurrentEnvironment().count("CTRUN_CONFIG_TEST_VAR") == 0);
}

}  // namespace
}  // namespace ctrun::launcher
