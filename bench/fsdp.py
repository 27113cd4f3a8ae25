"""The logic of bench/fsdp.sh: FSDP / ZeRO memory and step time against DDP.

Two models, both under ctrun, Gloo, CPU, one intra-op thread per rank, at 2
and 4 ranks (WORLDS):

(1) SmallCnn (ctrun-fashion-mnist, batch 64 per rank, SGD with momentum):
    --strategy ddp, zero1, zero2 and fsdp. Its activations dwarf its 320 KB
    of parameters, so it shows the 1/N of the state, not a smaller peak.
(2) The GPT of trainer/models (ctrun-gpt; LAYERS blocks of WIDTH, HEADS heads,
    SEQ_LEN tokens, byte vocabulary 128, BATCH sequences per rank, Adam):
    --strategy ddp (DDP over all ranks) and fsdp (full shard, one unit per
    block: the embedding rides with block 0, the head with the last block).
    At this width parameters + gradients + Adam state are >= 90 % of the
    tensor bytes alive at DDP's in-step peak (printed as `state share`).

Bytes (both models, the method this bench always used): tensor storage the
training core owns, each storage counted once.
  state_bytes  parameters + gradients + optimizer state held between steps;
  peak_bytes   state_bytes plus the most the wrapper holds at once within a
               step: DDP/ZeRO-1 their gradient buckets (C++ DDP's gradients
               are views of its buckets, so these count once); ZeRO-2/FSDP
               the gathered units and full-size gradient/reduce buffers in
               flight, including the all-to-all receive buffer of Gloo's
               reduce-scatter. Activations are not in it.
For the GPT the allocator's view is printed beside it (`tensor peak`: every
CPU tensor byte alive at the step's high point, activations included, less
what was alive before the model was built; trainer/parallel/memory_meter.h).
Step time (GPT): whole iterations (forward, backward, gradient sync,
optimizer step), mean over STEPS-1 steps per run, median over REPS
interleaved runs, min-max beside it.

Ends with
  RESULT fsdp_mem_ratio <SmallCnn: FSDP state_bytes / (DDP state_bytes / N), N = 4>
  RESULT fsdp_peak_ratio <GPT: FSDP peak_bytes / (DDP peak_bytes / N + the
                          largest unit's full size), the larger of N = 2, 4; goal <= 1.3>
and writes $CTRUN_BUILD_DIR/bench/fsdp-<time>.json (plot: peak bytes per rank,
FSDP vs DDP, at 2 and 4 ranks).

Env: CTRUN_BUILD_DIR (./build), WORLDS ("2 4"), MODELS ("cnn gpt");
SmallCnn: STEPS (150), WARMUP (20), MIN_UNIT (1000: 3 FSDP units);
GPT: LAYERS (16), WIDTH (256), HEADS (8), SEQ_LEN (16), BATCH (2 per rank),
GPT_STEPS (4, the first not timed), REPS (3).
"""
import os
import re
import subprocess
import sys

import benchjson

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("CTRUN_BUILD_DIR", os.path.join(ROOT, "build"))
CTRUN = os.path.join(BUILD, "launcher", "ctrun")
CNN = os.path.join(BUILD, "trainer", "apps", "ctrun-fashion-mnist")
GPT = os.path.join(BUILD, "trainer", "apps", "ctrun-gpt")
WORLDS = [int(w) for w in os.environ.get("WORLDS", "2 4").split()]
MODELS = os.environ.get("MODELS", "cnn gpt").split()
STEPS = int(os.environ.get("STEPS", "150"))
WARMUP = int(os.environ.get("WARMUP", "20"))
MIN_UNIT = os.environ.get("MIN_UNIT", "1000")
LAYERS = os.environ.get("LAYERS", "16")
WIDTH = os.environ.get("WIDTH", "256")
HEADS = os.environ.get("HEADS", "8")
SEQ_LEN = os.environ.get("SEQ_LEN", "16")
BATCH = int(os.environ.get("BATCH", "2"))
GPT_STEPS = int(os.environ.get("GPT_STEPS", "4"))
REPS = int(os.environ.get("REPS", "3"))


def run(cmd, pattern, what):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          timeout=900)
    lines = [dict(kv.split("=", 1) for kv in m.split()) for m in re.findall(pattern, proc.stdout, re.M)]
    if proc.returncode != 0 or not lines:
        sys.exit(f"fsdp.py: {what} exited {proc.returncode}:\n{proc.stdout[-3000:]}")
    return [{k: float(v) for k, v in line.items()} for line in lines]


def cnn_section():
    print(f"SmallCnn (batch 64 per rank, SGD, {STEPS} steps after {WARMUP} warm-up, --min-unit-params {MIN_UNIT})")
    print(f"{'strategy':<8} {'ranks':>5} {'step_ms':>9} {'state_bytes':>12} {'peak_bytes':>12} {'rss_MiB':>7} "
          f"{'state/(ddp/N)':>13} {'peak/(ddp/N)':>12}")
    rows, ratio = [], None
    for world in WORLDS:
        base = {}
        for strategy in ("ddp", "zero1", "zero2", "fsdp"):
            line = run([CTRUN, "--standalone", "--nproc-per-node", str(world), "--no-python",
                        CNN, "--strategy", strategy, "--min-unit-params", MIN_UNIT,
                        "--max-steps", str(STEPS + WARMUP), "--bench-warmup", str(WARMUP), "--threads", "1",
                        "--epochs", "1000", "--test-limit", "100", "--log-every", "0", "--checkpoint-every", "0"],
                       r"^BENCH (.*)$", f"SmallCnn {strategy} x{world}")[0]
            if strategy == "ddp":
                base = line
            r = line["state_bytes"] / (base["state_bytes"] / world)
            p = line["peak_bytes"] / (base["peak_bytes"] / world)
            print(f"{strategy:<8} {world:>5} {line['step_ms']:9.2f} {line['state_bytes']:12.0f} "
                  f"{line['peak_bytes']:12.0f} {line['maxrss_kb'] / 1024:7.0f} {r:13.3f} {p:12.3f}", flush=True)
            rows.append({"strategy": strategy, "ranks": world, **line})
            if strategy == "fsdp":
                ratio = r
    return rows, ratio


def gpt_once(strategy, world):
    stats = run([CTRUN, "--standalone", "--nproc-per-node", str(world), "--no-python", GPT,
                 "--strategy", strategy, "--layers", LAYERS, "--width", WIDTH, "--heads", HEADS,
                 "--seq-len", SEQ_LEN, "--global-batch", str(BATCH * world), "--micro-batches", "1",
                 "--steps", str(GPT_STEPS), "--log-every", "0", "--threads", "1", "--store-timeout", "60"],
                r"^STATS (.*)$", f"GPT {strategy} x{world}")
    if len(stats) != world:
        sys.exit(f"fsdp.py: GPT {strategy} x{world}: {len(stats)} of {world} STATS lines")
    return stats


def gpt_section():
    print(f"\nGPT ({LAYERS} blocks, width {WIDTH}, {HEADS} heads, seq {SEQ_LEN}, vocab 128, batch {BATCH} "
          f"per rank, Adam; {GPT_STEPS} steps per run, the first not timed; {REPS} interleaved runs)", flush=True)
    runs = {}
    for i in range(REPS):
        for world in WORLDS:
            order = ("ddp", "fsdp") if i % 2 == 0 else ("fsdp", "ddp")
            for strategy in order:
                runs.setdefault((strategy, world), []).append(gpt_once(strategy, world))
    print(f"{'strategy':<8} {'ranks':>5} {'iter_ms median (min–max)':>26} {'state_MiB':>9} {'peak_MiB':>8} "
          f"{'unit_MiB':>8} {'tensor_peak_MiB':>15} {'state_share':>11}")
    mib = lambda b: b / 2**20
    table, ratios = {}, {}
    for world in WORLDS:
        for strategy in ("ddp", "fsdp"):
            reps = runs[(strategy, world)]
            # Bytes: the most over ranks (they differ by padding only) in the first run; they do not vary.
            first = reps[0]
            row = {
                "iter_s": [sum(s["iter_s"] for s in r) / len(r) for r in reps],
                "state_bytes": max(s["state_bytes"] for s in first),
                "peak_bytes": max(s["peak_bytes"] for s in first),
                "max_unit_bytes": max(s["max_unit_bytes"] for s in first),
                "tensor_peak_bytes": max(s["step_high_bytes"] for s in first),
            }
            table[(strategy, world)] = row
            share = row["state_bytes"] / row["tensor_peak_bytes"]
            print(f"{strategy:<8} {world:>5} {benchjson.fmt(row['iter_s'], 1e3):>26} {mib(row['state_bytes']):9.2f} "
                  f"{mib(row['peak_bytes']):8.2f} {mib(row['max_unit_bytes']):8.2f} "
                  f"{mib(row['tensor_peak_bytes']):15.2f} {share:11.3f}", flush=True)
    print("\nFSDP against DDP, per rank:")
    print(f"{'ranks':>5} {'ddp_peak/N+unit MiB':>19} {'fsdp_peak MiB':>13} {'peak_ratio':>10} "
          f"{'tensor_peak fsdp/ddp':>20} {'iter fsdp/ddp':>13}")
    for world in WORLDS:
        d, f = table[("ddp", world)], table[("fsdp", world)]
        bound = d["peak_bytes"] / world + f["max_unit_bytes"]
        ratios[world] = f["peak_bytes"] / bound
        iter_ratio = benchjson.spread(f["iter_s"])["median"] / benchjson.spread(d["iter_s"])["median"]
        print(f"{world:>5} {mib(bound):19.2f} {mib(f['peak_bytes']):13.2f} {ratios[world]:10.3f} "
              f"{f['tensor_peak_bytes'] / d['tensor_peak_bytes']:20.3f} {iter_ratio:13.3f}")
    return table, ratios


def main():
    needed = [CTRUN] + ([CNN] if "cnn" in MODELS else []) + ([GPT] if "gpt" in MODELS else [])
    for f in needed:
        if not os.access(f, os.X_OK):
            sys.exit(f"fsdp.py: {f} is not built (build it, or set CTRUN_BUILD_DIR)")
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}", flush=True)
    doc, results = {"config": {"worlds": WORLDS}}, {}
    if "cnn" in MODELS:
        rows, mem_ratio = cnn_section()
        doc["small_cnn"] = rows
        results["fsdp_mem_ratio"] = mem_ratio
    if "gpt" in MODELS:
        table, ratios = gpt_section()
        doc["gpt"] = {"model": {"layers": int(LAYERS), "width": int(WIDTH), "heads": int(HEADS),
                                "seq_len": int(SEQ_LEN), "batch_per_rank": BATCH, "steps": GPT_STEPS,
                                "reps": REPS},
                      "runs": [{"strategy": s, "ranks": w, **row} for (s, w), row in table.items()]}
        results["fsdp_peak_ratio"] = max(ratios.values())
        one = lambda b: {"median": b / 2**20, "min": b / 2**20, "max": b / 2**20}
        doc["plots"] = [{
            "file": "fsdp-peak-per-rank.png",
            "title": f"Peak bytes per rank, GPT ({LAYERS}x{WIDTH}, Adam): FSDP full-shard vs DDP",
            "x": "ranks", "y": "MiB per rank (params + grads + Adam + in-step buffers)",
            "log_x": False, "log_y": False,
            "series": {
                "DDP": [{"x": w, **one(table[("ddp", w)]["peak_bytes"])} for w in WORLDS],
                "FSDP full-shard": [{"x": w, **one(table[("fsdp", w)]["peak_bytes"])} for w in WORLDS],
                "DDP / N + largest unit": [{"x": w, **one(table[("ddp", w)]["peak_bytes"] / w +
                                                          table[("fsdp", w)]["max_unit_bytes"])} for w in WORLDS],
            }}]
    doc["results"] = results
    path = benchjson.write("fsdp", doc, ROOT)
    print(f"\nmachine-readable results: {path}")
    if "fsdp_mem_ratio" in results:
        print(f"RESULT fsdp_mem_ratio {results['fsdp_mem_ratio']:.3f}")
    if "fsdp_peak_ratio" in results:
        print(f"RESULT fsdp_peak_ratio {results['fsdp_peak_ratio']:.3f}")


if __name__ == "__main__":
    main()
