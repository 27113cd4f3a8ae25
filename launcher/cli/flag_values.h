// The value parsers of the flag table (launcher/cli/flags.h): each checks one
// flag's value and stores it into the LaunchConfig, or returns
// InvalidArgument whose message is "<what is wrong> (<the fix>)"; the caller
// prefixes it with the flag or PET_* name and the value. On an error the
// config is left as it was. config.cc and `ctrun status` reuse ParseEndpoint.
//
// Pure functions; thread-safe.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "launcher/cli/launch_config.h"

namespace ctrun::launcher {

// Decimal integer, optional '+' or '-', nothing else (no spaces, no "1e3");
// nullopt otherwise.
std::optional<long long> ParseInt(std::string_view s);

// A finite number of seconds > 0 ("0.5", "30", "1e2"; surrounding spaces
// allowed). `example` is shown in the error's fix.
Result<Seconds> PositiveSeconds(std::string_view v, std::string_view example);

// nullopt for "", else the value.
std::optional<std::string> NoneIfEmpty(std::string_view v);

// An integer from 0 to 1e9 into `out`; `example` is shown in the fix.
Status ApplyNonNegativeInt(std::string_view v, int& out, std::string_view example);

// One of `choices` (exact match) into `out`; the error lists them.
Status ApplyChoice(std::string_view v, std::initializer_list<std::string_view> choices, std::string& out);

// A kSwitch value: "1" is on, anything else ("0") off. Never fails.
Status ApplySwitch(std::string_view v, bool& out);

// A PET_* value of an on/off flag, read as torchrun's check_env reads it,
// bool(int(v)): Python's int() syntax (surrounding spaces, a sign, '_'
// between digits), any integer; non-zero is on. nullopt for anything else.
std::optional<bool> ParseSwitchEnv(std::string_view v);

// --shutdown-timeout: a whole number of seconds >= 0 (torch: type=int,
// negative refused) into `out`.
Status ApplyShutdownTimeout(std::string_view v, Seconds& out);

// --duplicate-stdout-filters / --duplicate-stderr-filters, split as
// torchrun splits them: on ',', with ",," standing for a literal comma
// ("a,,b" is the one filter "a,b"). "" is the one empty filter, which every
// line contains (torch's [""]).
std::vector<std::string> ParseFilterList(std::string_view v);

// --straggler-factor: a finite number > 1, or 0 (never flag).
Status ApplyStragglerFactor(std::string_view v, double& out);
// --straggler-intervals: an integer from 1 to 1e6.
Status ApplyStragglerIntervals(std::string_view v, int& out);

// 0 turns the feature off; otherwise a finite number of seconds > 0.
Status ApplyTimeoutOrOff(std::string_view v, Seconds& out, std::string_view example);

// --redirects / --tee: "0".."3" for every local rank, or a comma list of
// "<digit>:<0-3>" per local rank.
Status ApplyStreams(std::string_view v, StreamSelection& out);

// --local-ranks-filter: a comma list of local ranks (0..1e6); "" = none.
Status ApplyLocalRanksFilter(std::string_view v, LaunchConfig& c);

// --signals-to-handle: a comma list of SIGTERM, SIGINT, SIGHUP, SIGQUIT,
// SIGUSR1, SIGUSR2 (case-insensitive, SIG prefix optional); repeats dropped.
Status ApplySignals(std::string_view v, LaunchConfig& c);

// --preempt-signal: one signal of ApplySignals' list (not SIGKILL/SIGSTOP,
// which cannot be caught) into c.preempt_signal.
Status ApplyPreemptSignal(std::string_view v, LaunchConfig& c);

// --rdzv-conf: "KEY=VALUE,..." over the known keys (durations, booleans,
// store_type, token_file, tls_*, rank, metrics_port); replaces c.rdzv_conf whole, with
// every pair given also kept in RdzvConf::given.
Status ApplyRdzvConf(std::string_view v, LaunchConfig& c);

// --nnodes: "N" or "MIN:MAX" with 0 < MIN <= MAX <= 1e6.
Status ApplyNnodes(std::string_view v, LaunchConfig& c);
// --ft-replicas MIN:MAX (1 <= MIN <= MAX).
Status ApplyFtReplicas(std::string_view v, LaunchConfig& c);
// --ft-group-size NODES (1 <= NODES <= kFtMaxGroupNodes).
Status ApplyFtGroupSize(std::string_view v, int& out);

// --nproc-per-node: a positive integer, auto, cpu or gpu.
Status ApplyNproc(std::string_view v, LaunchConfig& c);

// --rdzv-backend: static, c10d, grpc (= c10d), etcd, etcd-v2, etcd-v3.
Status ApplyBackend(std::string_view v, LaunchConfig& c);

// --rdzv-endpoint: "" or a ParseEndpoint-able text (port 0 allowed), stored
// trimmed.
Status ApplyEndpoint(std::string_view v, LaunchConfig& c);

// `host[:port]` or `[v6]` or `[v6]:port`. `default_port` is used when no
// port is written; a written port must be 1..65535, or 0..65535 with
// `allow_port_zero` (--rdzv-endpoint HOST:0: the hosting agent binds a free
// port; launcher/rdzv/resolve.h refuses it on a node that would join).
struct Endpoint {
  std::string host;
  int port = 0;
  bool port_given = false;
};
Result<Endpoint> ParseEndpoint(std::string_view text, int default_port, bool allow_port_zero = false);

}  // namespace ctrun::launcher
