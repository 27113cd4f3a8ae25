"""Draws the charts of docs/benchmarks.md from the benches' JSON files.

    /usr/bin/python3 bench/plot.py [--out docs/img] RESULTS.json...

Every bench in bench/ writes one JSON file per run ($CTRUN_BUILD_DIR/bench/
<bench>-<time>.json, its path printed under the table). Each file carries a
top-level "plots" list, one entry per chart:

    {"file": "launch-vs-n.png", "title": "...", "x": "x-axis label",
     "y": "y-axis label", "log_x": false, "log_y": false,
     "series": {"ctrun": [{"x": 8, "median": 0.007, "min": 0.006,
                           "max": 0.009}, ...], "torchrun": [...]}}

A chart may also carry "anchors": figures from elsewhere to compare with,
each drawn as a star with its label, not joined to any series:

    "anchors": [{"x": 4000, "y": 10.0, "label": "torchrun 2.x, pytorch#124982"}]

A point whose median, min and max are all null (or NaN) is a run that
failed: it is not drawn. A number as x gives a line per series with min–max error bars; a string gives
grouped bars with the same error bars. Where several files name the same
chart, the newest "date" wins, so `bench/plot.py build/bench/*.json` redraws
every chart from the latest runs. The PNGs carry no timestamps: the same
input draws the same bytes. A bad file is one line naming the file and the
field, exit 2; nothing is written then.
"""
import argparse
import json
import math
import os
import sys

USAGE_ERROR = 2


class BadInput(Exception):
    pass


def load(path):
    """The charts of one results file, checked: [(date, machine, plot)]."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise BadInput(f"{path}: cannot read it ({e.strerror})")
    except ValueError as e:
        raise BadInput(f"{path}: not JSON ({e}); pass the .json files the benches print")
    if not isinstance(doc, dict) or not isinstance(doc.get("plots"), list):
        raise BadInput(f"{path}: no \"plots\" list at the top level; this file was not written by a "
                       "bench in bench/ (or by one older than the charts)")
    date = str(doc.get("date", ""))
    machine = describe_machine(doc.get("machine", ""))
    out = []
    for i, plot in enumerate(doc["plots"]):
        where = f"{path}: plots[{i}]"
        check_plot(where, plot)
        out.append((date, machine, plot))
    return out


def describe_machine(m):
    """The footnote's machine: a bench's string as it is, or the main fields
    of its machine object."""
    if isinstance(m, dict):
        parts = [str(m[k]) for k in ("cpu_model",) if m.get(k)]
        if m.get("cpus"):
            parts.append(f"{m['cpus']} CPUs")
        if m.get("kernel"):
            parts.append(f"Linux {m['kernel']}")
        return ", ".join(parts)
    return str(m)[:100]


def missing(v):
    """null or NaN: the bench recorded a failed run, which has no figure."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def drawn(points):
    """The points that have a figure."""
    return [p for p in points if not missing(p["median"])]


def check_plot(where, plot):
    if not isinstance(plot, dict):
        raise BadInput(f"{where} is not an object")
    for key in ("file", "title", "x", "y"):
        if not isinstance(plot.get(key), str) or not plot[key]:
            raise BadInput(f"{where} needs a non-empty string \"{key}\"")
    name = plot["file"]
    if os.path.basename(name) != name or not name.endswith(".png"):
        raise BadInput(f"{where}.file is {name!r}: give a plain file name ending in .png")
    series = plot.get("series")
    if not isinstance(series, dict) or not series:
        raise BadInput(f"{where} needs a non-empty \"series\" object (name → list of points)")
    kinds = set()
    for label, points in series.items():
        if not isinstance(points, list) or not points:
            raise BadInput(f"{where}.series.{label} is not a non-empty list of points")
        for j, p in enumerate(points):
            at = f"{where}.series.{label}[{j}]"
            if not isinstance(p, dict):
                raise BadInput(f"{at} is not an object with x, median, min and max")
            for key in ("x", "median", "min", "max"):
                if key not in p:
                    raise BadInput(f"{at} has no \"{key}\" (each point needs x, median, min and max)")
            if all(missing(p[key]) for key in ("median", "min", "max")):
                continue  # a run that failed: no figure, not drawn
            for key in ("median", "min", "max"):
                v = p[key]
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise BadInput(f"{at}.{key} is {v!r}: give a finite number (or null, or NaN, "
                                   "for all three of median, min and max where the run failed)")
            if not missing(p["median"]) and not p["min"] <= p["median"] <= p["max"]:
                raise BadInput(f"{at}: min ≤ median ≤ max does not hold "
                               f"({p['min']}, {p['median']}, {p['max']})")
            x = p["x"]
            if isinstance(x, str):
                kinds.add("category")
            elif isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
                kinds.add("number")
            else:
                raise BadInput(f"{at}.x is {x!r}: give a number (line chart) or a string (bars)")
    if len(kinds) > 1:
        raise BadInput(f"{where}: x mixes numbers and strings; use one kind per chart")
    check_anchors(where, plot, kinds)
    for axis in ("log_x", "log_y"):
        if axis in plot and not isinstance(plot[axis], bool):
            raise BadInput(f"{where}.{axis} is {plot[axis]!r}: give true or false")
    if plot.get("log_x") and "category" in kinds:
        raise BadInput(f"{where}: log_x needs numeric x")
    if plot.get("log_y") or plot.get("log_x"):
        for label, points in series.items():
            for j, p in enumerate(points):
                if missing(p["median"]):
                    continue
                if (plot.get("log_y") and p["min"] <= 0) or (plot.get("log_x") and p["x"] <= 0):
                    raise BadInput(f"{where}.series.{label}[{j}]: a log axis needs values above 0")


def check_anchors(where, plot, kinds):
    """A chart's optional "anchors": a list of {x, y, label}, numeric x and y
    (above 0 on a log axis), on a line chart only."""
    anchors = plot.get("anchors", [])
    if not isinstance(anchors, list):
        raise BadInput(f"{where}.anchors is not a list of {{x, y, label}} objects")
    if anchors and "category" in kinds:
        raise BadInput(f"{where}.anchors: anchors need a line chart (numeric x)")
    for j, a in enumerate(anchors):
        at = f"{where}.anchors[{j}]"
        if not isinstance(a, dict) or not isinstance(a.get("label"), str) or not a["label"]:
            raise BadInput(f"{at} needs x, y and a non-empty string \"label\"")
        for key in ("x", "y"):
            v = a.get(key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise BadInput(f"{at}.{key} is {v!r}: give a finite number")
            if plot.get("log_" + key) and v <= 0:
                raise BadInput(f"{at}.{key} is {v!r}: a log axis needs values above 0")


def draw_anchors(ax, anchors, xs, log_x):
    """Each anchor a star with its label beside it, on the side of the
    chart's middle (measured x `xs`) so that the label stays inside."""
    scale = math.log if log_x else (lambda v: v)
    middle = (scale(min(xs)) + scale(max(xs))) / 2 if xs else 0
    for a in anchors:
        ax.plot([a["x"]], [a["y"]], marker="*", markersize=13, color="black", linestyle="none")
        left = scale(a["x"]) > middle
        ax.annotate(a["label"], (a["x"], a["y"]), textcoords="offset points", xytext=(-8 if left else 8, -14),
                    ha="right" if left else "left", fontsize=8)


def newest(charts):
    """One chart per file name: the one from the newest run."""
    chosen = {}
    for date, machine, plot in charts:
        name = plot["file"]
        if name not in chosen or date >= chosen[name][0]:
            chosen[name] = (date, machine, plot)
    return [chosen[k] for k in sorted(chosen)]


def draw(plt, date, machine, plot, out_dir):
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    series = plot["series"]
    numeric = not isinstance(next(iter(series.values()))[0]["x"], str)
    if numeric:
        for label, points in series.items():
            points = sorted(drawn(points), key=lambda p: p["x"])
            if not points:
                continue
            xs = [p["x"] for p in points]
            med = [p["median"] for p in points]
            err = [[p["median"] - p["min"] for p in points], [p["max"] - p["median"] for p in points]]
            ax.errorbar(xs, med, yerr=err, marker="o", capsize=3, label=label)
        ticks = sorted({p["x"] for points in series.values() for p in drawn(points)})
        draw_anchors(ax, plot.get("anchors", []), ticks, plot.get("log_x"))
        if plot.get("log_x"):
            ax.set_xscale("log")
        if plot.get("log_x") or (len(ticks) <= 12 and all(float(t).is_integer() for t in ticks)):
            ax.set_xticks(ticks)
            ax.set_xticklabels([f"{t:g}" for t in ticks])
            ax.xaxis.set_minor_locator(plt.NullLocator())  # only the measured x
    else:
        categories = []
        for points in series.values():
            for p in points:
                if p["x"] not in categories:
                    categories.append(p["x"])
        width = 0.8 / len(series)
        for k, (label, points) in enumerate(series.items()):
            by_x = {p["x"]: p for p in drawn(points)}
            xs, med, lo, hi = [], [], [], []
            for i, c in enumerate(categories):
                if c in by_x:
                    p = by_x[c]
                    xs.append(i - 0.4 + width * (k + 0.5))
                    med.append(p["median"])
                    lo.append(p["median"] - p["min"])
                    hi.append(p["max"] - p["median"])
            ax.bar(xs, med, width, yerr=[lo, hi], capsize=3, label=label)
        ax.set_xticks(range(len(categories)))
        ax.set_xticklabels(categories)
    if plot.get("log_y"):
        ax.set_yscale("log")
    ax.set_title(plot["title"], fontsize=11)
    ax.set_xlabel(plot["x"])
    ax.set_ylabel(plot["y"])
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=9)
    note = "median, bars min–max"
    if machine or date:
        note += f"; {machine}{', ' if machine and date else ''}{date[:10]}"
    fig.text(0.99, 0.01, note, ha="right", va="bottom", fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    path = os.path.join(out_dir, plot["file"])
    # No Software/date metadata: the same input draws the same bytes.
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description="Draws docs/benchmarks.md's charts from the benches' "
                                "JSON files (see this file's docstring for the format).")
    p.add_argument("results", nargs="+", help="JSON files written by the benches in bench/")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "docs", "img"), help="where the PNGs go (default docs/img)")
    args = p.parse_args(argv)
    try:
        charts = []
        for path in args.results:
            charts.extend(load(path))
        if not charts:
            raise BadInput("the files name no charts (every \"plots\" list is empty)")
        if not os.path.isdir(args.out):
            raise BadInput(f"--out {args.out}: no such directory; create it or pass another")
    except BadInput as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return USAGE_ERROR
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.hashsalt"] = "ctrun"  # deterministic ids, should SVG ever be asked for
    for date, machine, plot in newest(charts):
        print(draw(plt, date, machine, plot, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
