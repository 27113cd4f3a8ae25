"""Runs this Python's torchrun and ctrun (argv[1]) on the same command lines
with a worker that dumps its environment (dump_worker.py), and prints every
variable that differs or that only one of them sets, besides ports and
temporary paths. Made for a GPU machine with torch 2.x (tests/gpu/check.sh);
the suite's own comparison against this machine's torch 1.13 is in
tests/integration/test_launcher.py."""
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = [
    ("plain", ["--nproc-per-node", "2", "--max-restarts", "2", "--rdzv-id", "job7", "--role", "trainer"],
     ["--lr", "${local_rank}"]),
    ("standalone, one worker per GPU", ["--standalone", "--nproc-per-node", "gpu"], []),
    ("auto", ["--nproc-per-node", "auto"], []),
    ("virtual local rank", ["--nproc-per-node", "2", "--virtual-local-rank"], []),
    ("c10d, elastic", ["--nnodes", "1:2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                       "--rdzv-endpoint", "127.0.0.1:{port}", "--rdzv-id", "el",
                       "--rdzv-conf", "last_call_timeout=1"], []),
    ("NUMA binding, one worker per GPU", ["--nproc-per-node", "gpu", "--numa-binding", "node"], []),
]
NOISE = {"MASTER_PORT", "TORCHELASTIC_ERROR_FILE", "TORCHELASTIC_RUN_ID", "DUMP_DIR", "_", "OLDPWD"}


def run(launcher, args, worker_args, port):
    dump_dir, log_dir = tempfile.mkdtemp(), tempfile.mkdtemp()
    env = dict(os.environ, DUMP_DIR=dump_dir)
    env.pop("OMP_NUM_THREADS", None)
    cmd = launcher + [a.format(port=port) for a in args] + ["--log-dir", log_dir,
                                                          os.path.join(HERE, "dump_worker.py")] + worker_args
    start = time.monotonic()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - start
    dumps = {}
    for path in sorted(glob.glob(os.path.join(dump_dir, "env_*.json"))):
        with open(path) as f:
            dumps[os.path.basename(path)] = json.load(f)
    return r, dumps, took


def main():
    ctrun = sys.argv[1]
    for name, args, worker_args in CASES:
        print(f"=== {name}: {' '.join(args)}")
        rt, torchrun, t_took = run([sys.executable, "-m", "torch.distributed.run"], args, worker_args, 29611)
        rc, ours, c_took = run([ctrun], args, worker_args, 29612)
        print(f"  torchrun exit {rt.returncode} in {t_took:.2f} s; ctrun exit {rc.returncode} in {c_took:.2f} s")
        for label, r in (("torchrun", rt), ("ctrun", rc)):
            if r.returncode:
                print(f"  {label} stderr: {r.stderr[-1500:]}")
        for f in sorted(set(torchrun) | set(ours)):
            a, b = torchrun.get(f), ours.get(f)
            if not a or not b:
                print(f"  {f}: only under {'torchrun' if a else 'ctrun'}")
                continue
            for k in sorted(set(a["env"]) | set(b["env"])):
                if k not in NOISE and a["env"].get(k) != b["env"].get(k):
                    print(f"  {f} {k}: torchrun {a['env'].get(k)!r}, ctrun {b['env'].get(k)!r}")
            for key in ("argv", "exe", "cpus"):
                if a[key] != b[key]:
                    print(f"  {f} {key}: torchrun {a[key]}, ctrun {b[key]}")


if __name__ == "__main__":
    main()
