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
         fmt::format("no_agent_store={}\nevents_file={}\ndedup_logs={}\nshare_logs={}\n", c.no_agent_store,
                     Opt(c.events_file), c.dedup_logs, c.share_logs) +
         fmt::format("restart_backoff={}\nmin_healthy_uptime={}\nfail_fast_on_startup={}\nkill_timeout={}\n"
                     "hang_stacks_timeout={}\nrestart_on_any_failure={}\nkill_on_bad_exit={}\n",
                     c.restart_backoff.count(), c.min_healthy_uptime.count(), c.fail_fast_on_startup,
                     c.kill_timeout.count(), c.hang_stacks_timeout.count(), c.restart_on_any_failure,
                     c.kill_on_bad_exit) +
         fmt::format("health_check={}\nhealth_check_timeout={}\nhealth_check_interval={}\nmax_unhealthy={}\n",
                     Opt(c.health_check), c.health_check_timeout.count(), c.health_check_interval.count(),
                     c.max_unhealthy_nodes ? *c.max_unhealthy_nodes : -1) +
         fmt::format("straggler_factor={}\nstraggler_intervals={}\n", c.straggler_factor, c.straggler_intervals) +
         fmt::format("preempt_grace={}\npreempt_signal={}\n", c.preempt_grace ? c.preempt_grace->count() : -1.0,
                     c.preempt_signal) +
         fmt::format("ft={}\nft_join_timeout={}\nft_group_size={}\nft_exact={}\n",
                     c.ft ? fmt::format("{}:{} group {} of {}", c.ft->min_replicas, c.ft->max_replicas,
                                        c.ft->group_index, c.ft->group_size)
                          : "off",
                     c.ft_join_timeout.count(), c.ft_group_size, c.ft_exact) +
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
        "module=false", "no_python=false", "run_path=false", "script=train.py", "script_args=", "no_agent_store=false", "dedup_logs=false", "share_logs=false",
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

// Every case's config has each of its lines.
void CheckGood(const std::vector<GoodCase>& cases) {
  for (const GoodCase& c : cases) {
    std::string d = Dump(Good(c.args, c.env));
    for (const std::string& line : c.lines) {
      INFO(fmt::format("args: {}\n{}", fmt::join(c.args, " "), d));
      CHECK(HasLine(d, line));
    }
  }
}

TEST_CASE("good inputs fill the expected fields: node counts, processes per node and stream selections", "[config]") {
  CheckGood({
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
  });
}

TEST_CASE("a unique prefix of a flag is that flag, as argparse reads torchrun's", "[config]") {
  CheckGood({
      {{"--nproc", "4", "t.py"}, {}, {"nproc=number:4"}},  // both of --nproc-per-node's spellings: one flag
      {{"--nproc_per", "4", "t.py"}, {}, {"nproc=number:4"}},
      {{"--nnode=2", "t.py"}, {}, {"nnodes=2:2"}},
      {{"--standal", "t.py"}, {}, {"standalone=true"}},
      {{"--max_re", "3", "--rdzv_b", "c10d", "t.py"}, {}, {"max_restarts=3", "rdzv_backend=c10d"}},
      {{"--no-py", "t.py"}, {}, {"no_python=true"}},
      {{"--nproc-per-node", "2", "--nproc", "3", "t.py"}, {}, {"nproc=number:3"}},  // last one wins
  });
  auto help = ParseCommandLine({"--hel"}, {});
  REQUIRE(help.ok());
  CHECK(help->action == ParseAction::kHelp);
}

TEST_CASE("good inputs fill the expected fields: rendezvous backends and endpoints", "[config]") {
  CheckGood({
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
  });
}

TEST_CASE("good inputs fill the expected fields: --rdzv-conf keys", "[config]") {
  CheckGood({
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
  });
}

TEST_CASE("good inputs fill the expected fields: signals, ranks, restarts, modes and the other flags", "[config]") {
  CheckGood({
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
  });
}

TEST_CASE("good inputs fill the expected fields: shutdown timeouts, environment variables, filters and the script",
          "[config]") {
  CheckGood({
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
  });
}

TEST_CASE("good run ids and node names pass: UTF-8, up to the limit", "[config]") {
  const std::string utf8 = "ex\xc3\xa9" "cution-\xe2\x82\xac";
  for (const std::string& id : {std::string("job-42_a.b"), std::string(128, 'j'), utf8}) {
    auto parsed = ParseCommandLine({"--rdzv-id", id, "--local-addr", std::string(253, 'n'), "t.py"}, {});
    REQUIRE(parsed.ok());
    CHECK(parsed->config.rdzv_id == id);
  }
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
    {"--ft-replicas", "2:3"}, {"--ft-join-timeout", "9"}, {"--ft-group-size", "2"},
    {"--preempt-grace", "45"}, {"--preempt-signal", "usr2"}, {"--kill-on-bad-exit", "0"},
};

// Flags that need others beside them to be valid: --ft-replicas its quorum
// server. The loop below gives them these arguments first, in its base too.
std::vector<std::string> ContextFor(std::string_view flag) {
  if (flag == "--ft-replicas") return {"--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1"};
  if (flag == "--ft-exact") return {"--ft-replicas", "2:3", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1"};
  if (flag == "--preempt-signal") return {"--preempt-grace", "9"};
  if (flag == "--ft-group-size") {
    return {"--ft-replicas", "2:3", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1", "--node-rank", "5"};
  }
  return {};
}

TEST_CASE("every spelling of every flag in the table works as --f v and --f=v and PET_", "[config][flags]") {
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
    const Args ctx = ContextFor(flag.name);
    auto with = [&](Args args) {
      args.insert(args.begin(), ctx.begin(), ctx.end());
      return args;
    };
    if (flag.kind == FlagKind::kSwitch) {
      const std::string on = Dump(Good(with({std::string(flag.name), "/abs/t.py"})));
      CHECK(on != Dump(Good(with({"/abs/t.py"}))));
      for (std::string_view s : flag.spellings) CHECK(Dump(Good(with({std::string(s), "/abs/t.py"}))) == on);
      if (!flag.env.empty()) CHECK(Dump(Good(with({"/abs/t.py"}), {{std::string(flag.env), "1"}})) == on);
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
    const std::string expected = Dump(Good(with({std::string(flag.name), v, "/abs/t.py"})));
    if (flag.name != "--node-rank") CHECK(expected != Dump(Good(with({"/abs/t.py"}))));
    for (std::string_view s : flag.spellings) {
      INFO(s);
      CHECK(Dump(Good(with({std::string(s), v, "/abs/t.py"}))) == expected);
      CHECK(Dump(Good(with({fmt::format("{}={}", s, v), "/abs/t.py"}))) == expected);
      if (s.size() == 2) CHECK(Dump(Good(with({fmt::format("{}{}", s, v), "/abs/t.py"}))) == expected);
    }
    if (!flag.env.empty()) CHECK(Dump(Good(with({"/abs/t.py"}), {{std::string(flag.env), v}})) == expected);
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

TEST_CASE("CTRUN_DEDUP_WINDOW_MS: a positive number of milliseconds sets the dedup window; anything else is ignored",
          "[config]") {
  CHECK_FALSE(Good({"/abs/t.py"}).dedup_window.has_value());
  CHECK(Good({"/abs/t.py"}, {{"CTRUN_DEDUP_WINDOW_MS", "600000"}}).dedup_window ==
        std::optional<std::chrono::milliseconds>(600000));
  for (const char* bad : {"", "0", "-5", "12ms", "abc"}) {
    CHECK_FALSE(Good({"/abs/t.py"}, {{"CTRUN_DEDUP_WINDOW_MS", bad}}).dedup_window.has_value());
  }
}

TEST_CASE("preemption: off by default; its signal is caught; Slurm's end time is read", "[config]") {
  const LaunchConfig d = Good({"/abs/t.py"});
  CHECK_FALSE(d.preempt_grace.has_value());
  CHECK(d.preempt_signal == 0);
  CHECK_FALSE(d.slurm_job_end_unix_s.has_value());
  const LaunchConfig c = Good({"--preempt-grace", "30", "--preempt-signal", "SIGUSR2", "--signals-to-handle",
                               "TERM", "/abs/t.py"},
                              {{"SLURM_JOB_END_TIME", "1790000000"}});
  CHECK(c.preempt_grace->count() == 30);
  CHECK(c.preempt_signal == SIGUSR2);
  CHECK(c.signals_to_handle == std::vector<int>{SIGTERM, SIGUSR2});  // added: ctrun must catch it
  CHECK(c.slurm_job_end_unix_s == std::optional<double>(1790000000));
  for (const char* ignored : {"", "0", "-5", "Unlimited", "17x"}) {
    INFO(ignored);
    CHECK_FALSE(Good({"/abs/t.py"}, {{"SLURM_JOB_END_TIME", ignored}}).slurm_job_end_unix_s.has_value());
  }
}

TEST_CASE("CurrentEnvironment snapshots environ", "[config]") {
  ::setenv("CTRUN_CONFIG_TEST_VAR", "a=b", 1);
  Environment env = CurrentEnvironment();
  ::unsetenv("CTRUN_CONFIG_TEST_VAR");
  CHECK(env.at("CTRUN_CONFIG_TEST_VAR") == "a=b");
  CHECK(CurrentEnvironment().count("CTRUN_CONFIG_TEST_VAR") == 0);
}

TEST_CASE("CTRUN_PORT_SNIFF_DEADLINE_MS: a positive number of milliseconds, anything else ignored", "[config]") {
  CHECK_FALSE(Good({"/abs/t.py"}).port_sniff_deadline.has_value());
  CHECK(Good({"/abs/t.py"}, {{"CTRUN_PORT_SNIFF_DEADLINE_MS", "300"}}).port_sniff_deadline ==
        std::optional<std::chrono::milliseconds>(300));
  for (const char* ignored : {"", "0", "-5", "soon", "17x"}) {
    INFO(ignored);
    CHECK_FALSE(Good({"/abs/t.py"}, {{"CTRUN_PORT_SNIFF_DEADLINE_MS", ignored}}).port_sniff_deadline.has_value());
  }
}

}  // namespace
}  // namespace ctrun::launcher
