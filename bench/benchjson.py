"""The machine-readable side of a bench run, shared by every bench
(ddp, fsdp, parallel, launch, rendezvous, store): one JSON file per run at $CTRUN_BUILD_DIR/bench/<name>-<time>.json
with the figures, the machine and a top-level "plots" list that bench/plot.py
draws generically:
  {"file": "x.png", "title": ..., "x": "x label", "y": "y label",
   "log_x": false, "log_y": false,
   "series": {"name": [{"x": 2, "median": ..., "min": ..., "max": ...}, ...]}}
x is a number (a line chart with min-max error bars) or a string (grouped bars).
"""
import json
import os
import platform
import statistics
import time


def machine():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    return {"host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
            "cpu_model": cpu, "load_avg_1m": os.getloadavg()[0]}


def spread(values):
    """median, min, max and n of a non-empty list."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def point(x, values, scale=1.0):
    """One plotted point: x and the median / min / max of `values` times `scale`."""
    s = spread(values)
    return {"x": x, "median": s["median"] * scale, "min": s["min"] * scale, "max": s["max"] * scale}


def fmt(values, scale=1.0, digits=1):
    """'median (min–max)' of `values` times `scale`."""
    s = spread(values)
    return f"{s['median'] * scale:.{digits}f} ({s['min'] * scale:.{digits}f}–{s['max'] * scale:.{digits}f})"


def write(name, doc, root, path=None, build=None):
    """Writes `doc` (with bench, date and machine added) to the run's JSON file
    and returns its path: `path` when given (a bench's --json), else
    <build>/bench/<name>-<time>.json, build defaulting to $CTRUN_BUILD_DIR
    (else <root>/build)."""
    build = build or os.environ.get("CTRUN_BUILD_DIR", os.path.join(root, "build"))
    out = path or os.path.join(build, "bench", time.strftime(f"{name}-%Y%m%d-%H%M%S.json"))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    full = {"bench": name, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine()}
    full.update(doc)
    with open(out, "w") as f:
        json.dump(full, f, indent=1)
    return out
