"""One fault on one rank, for the verdict's tests (test_verdict.py,
test_crash_policy.py) and bench/verdict.py.

usage: fault.py FAULT DELAY RANK [RECORD]

Every rank runs steps of 0.05 s (touching $CTRUN_HEARTBEAT_FILE, when set,
once a step) for DELAY seconds; then global rank RANK makes FAULT, and the
others go on stepping until they are stopped. A Python exception is written
to $TORCHELASTIC_ERROR_FILE as torch's @record writes it, unless RECORD is
0 (a stock script: the text is only on stderr). No torch: a worker starts in
a few tens of milliseconds.

FAULT: segfault, abort, bus_error, illegal_instruction, arithmetic_error
(the signal, raised by the process itself), killed (SIGKILL by itself, no
OOM), oom (allocates until the kernel's OOM killer ends it: run it in a
memory cgroup with a limit), exception (ValueError), cuda_oom, nccl_error,
disk_full (a real ENOSPC: writes to /dev/full), file_not_found (opens a
missing file), import_error, nan (FloatingPointError), hang (stops stepping:
no heartbeat, no exit), exit (sys.exit(3), no text).
"""
import json
import os
import signal
import sys
import time
import traceback


def record(exc):
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path or (len(sys.argv) > 4 and sys.argv[4] == "0"):
        return
    data = {"message": {"message": f"{type(exc).__name__}: {exc}",
                        "extraInfo": {"py_callstack": traceback.format_exc(),
                                      "timestamp": str(int(time.time()))}}}
    with open(path, "w") as f:
        json.dump(data, f)


def raise_fault(fault):
    if fault == "exception":
        raise ValueError(f"rank {os.environ['RANK']} always fails here")
    if fault == "cuda_oom":
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.35 GiB total capacity)")
    if fault == "nccl_error":
        raise RuntimeError("NCCL error in: ProcessGroupNCCL.cpp:1269, internal error, NCCL version 2.18.1")
    if fault == "disk_full":
        with open("/dev/full", "w") as f:
            f.write("checkpoint")
            f.flush()
    if fault == "file_not_found":
        open("/nonexistent/ctrun-fault/data.bin")
    if fault == "import_error":
        __import__("ctrun_fault_module_that_does_not_exist")
    if fault == "nan":
        raise FloatingPointError("loss is nan at step 12")
    raise SystemExit(f"fault.py: unknown fault {fault!r}")


SIGNALS = {"segfault": signal.SIGSEGV, "abort": signal.SIGABRT, "bus_error": signal.SIGBUS,
           "illegal_instruction": signal.SIGILL, "arithmetic_error": signal.SIGFPE, "killed": signal.SIGKILL}


def fault_now(fault):
    if fault in SIGNALS:
        sys.stdout.flush()
        os.kill(os.getpid(), SIGNALS[fault])
        time.sleep(60)
    if fault == "oom":
        hoard = []
        while True:
            hoard.append(bytearray(64 << 20))
            for i in range(0, len(hoard[-1]), 4096):
                hoard[-1][i] = 1
    if fault == "hang":
        while True:
            time.sleep(3600)
    if fault == "exit":
        sys.exit(3)
    try:
        raise_fault(fault)
    except BaseException as exc:
        record(exc)
        raise


def main():
    fault, delay, rank = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    heartbeat = os.environ.get("CTRUN_HEARTBEAT_FILE")
    me = int(os.environ["RANK"])
    start = time.monotonic()
    while True:
        if heartbeat:
            with open(heartbeat, "a"):
                os.utime(heartbeat)
        if me == rank and time.monotonic() - start >= delay:
            fault_now(fault)
        time.sleep(0.05)


if __name__ == "__main__":
    main()
