// ft_quorum_load: N simulated replica groups against one ctrund's quorum
// (--ft-replicas: FtWatch, FtSync, FtLeave of proto/rendezvous.proto), all
// stepped together as fault-tolerant training steps them, in one process.
//
// Each group opens its FtWatch (held for the run, read to its end), then
// makes one FtSync per step: its vote on the step it trained (yes) and its
// request for the next quorum, asking for the compact answer
// (compact_sources = --sources: its own part of the quorum, not every
// member; --sources 0 asks for the whole quorum, as a client older than the
// compact answer does, which a server older than it always sends). Step 0
// forms the first quorum and is not measured. At each measured step:
//   - churn: --lose-per-min of the groups per minute of steps (at least
//     --min-losses in the run, spread over the steps) leave (FtLeave) at the
//     step's start, and come back at the next step's (a call without a
//     ballot: a newcomer that heals); a group coming back calls first;
//   - every other group calls; the step ends when each of them is answered,
//     or when the answers stall for --stall-s: the server benched the rest
//     (they did not vote within its hang time, step_sync.h), they stay in
//     flight and are answered at a later quorum (counted in "held_back").
// Measured per step: the time from the last call sent to the last answer
// (latency_s), the server's CPU seconds over the step (server_cpu_s, from
// /proc: --server-pid) and its RSS after it.
//
// The client: gRPC's async API over --queues completion queues, one thread
// each, each holding a share of the groups (their watches and calls), so
// that the generator's own gRPC bookkeeping stays O(N/queues) per
// completion (see ft_quorum_load_driver.h) and the generator does not
// become what is measured; absl's Mutex deadlock detection, which Debian's
// absl leaves on, is off, as in ctrund (rendezvous/grpc/net/grpc_process.h).
//
// Bounds: loopback or the endpoint given; --channels connections;
// every wait at most --timeout-s; steps run at most every --step-s;
// stops after --steps. At the end every group leaves as finished and its
// watch is cancelled.
//
// Prints one JSON object on stdout (ft_quorum_load_report.cc); exit 0 when
// every call was answered with a well-formed compact answer, 1 when not
// (the reason on stderr and in "error"), 2 for a bad argument.
//
// The parts: ft_quorum_load_driver.h (the groups and the Load), _steps.cc
// (watches and answers), _run.cc (the steps, churn, end), _report.cc.
#include <absl/synchronization/mutex.h>

#include <string>

#include "flag_reader.h"
#include "ft_quorum_load_driver.h"

namespace ft_quorum_load {
namespace {

[[noreturn]] void QuorumLoadUsage(const std::string& what) {
  bench_load::PrintUsageAndExit(
      "ft_quorum_load", what,
      "usage: ft_quorum_load --endpoint HOST:PORT [--groups N] [--channels C] [--queues Q] [--steps S] "
      "[--step-s S] "
      "[--lose-per-min F] [--min-losses K] [--sources K] [--run-id ID] [--timeout-s S] [--stall-s S] "
      "[--server-pid PID]\n");
}

}  // namespace

Options Parse(int argc, char** argv) {
  Options o;
  bench_load::FlagReader args(argc, argv, QuorumLoadUsage);
  args.ReadAll([&](const std::string& flag) {
    const std::string& value = args.Value();
    if (flag == "--endpoint") o.endpoint = value;
    else if (flag == "--run-id") o.run_id = value;
    else if (flag == "--groups") o.groups = static_cast<int>(args.Number(2));
    else if (flag == "--channels") o.channels = static_cast<int>(args.Number(1));
    else if (flag == "--queues") o.queues = static_cast<int>(args.Number(1));
    else if (flag == "--steps") o.steps = static_cast<int>(args.Number(2));
    else if (flag == "--step-s") o.step_s = args.Number(0);
    else if (flag == "--lose-per-min") o.lose_per_min = args.Number(0);
    else if (flag == "--min-losses") o.min_losses = static_cast<int>(args.Number(0));
    else if (flag == "--sources") o.sources = static_cast<int>(args.Number(0));
    else if (flag == "--timeout-s") o.timeout_s = args.Number(1);
    else if (flag == "--stall-s") o.stall_s = args.Number(0.001);
    else if (flag == "--server-pid") o.server_pid = static_cast<long>(args.Number(1));
    else return false;
    return true;
  });
  if (o.endpoint.empty()) args.Fail("--endpoint is required");
  if (o.groups > (1 << 17)) args.Fail("--groups is at most 131072 (the server's max_groups per run)");
  if (o.channels > o.groups) o.channels = o.groups;
  if (o.queues > 64) args.Fail("--queues is at most 64 (a thread each)");
  if (o.queues > o.groups) o.queues = o.groups;
  return o;
}

}  // namespace ft_quorum_load

int main(int argc, char** argv) {
  ft_quorum_load::Options o = ft_quorum_load::Parse(argc, argv);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // before gRPC's first lock
  ft_quorum_load::Load load(o);
  return load.Run();
}
