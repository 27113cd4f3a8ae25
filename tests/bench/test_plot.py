"""bench/plot.py draws every chart of the stored sample (tests/bench/sample/,
one results file per bench, in the format the benches write), draws the same
bytes twice, keeps the newest run where two name one chart, and refuses a bad
file with one line and exit 2, writing nothing. Also: every image that
docs/benchmarks.md shows exists under docs/img/."""
import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import struct
import tempfile
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("CTRUN_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
PLOT = os.path.join(ROOT, "bench", "plot.py")
SAMPLE = os.path.join(HERE, "sample")

# Loaded once, run in this process: matplotlib is imported once for all cases.
_spec = importlib.util.spec_from_file_location("plot", PLOT)
plot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plot)


def png_size(path):
    """(width, height) from the IHDR chunk; fails unless this is a PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert head[12:16] == b"IHDR", f"{path} has no IHDR first"
    return struct.unpack(">II", head[16:24])


def run(args):
    """plot.py's main on args: (returncode, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = plot.main(args)
    return types.SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


class PlotTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ctrun-plot-test-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def out_dir(self, name):
        d = os.path.join(self.tmp, name)
        os.mkdir(d)
        return d

    def samples(self):
        return sorted(os.path.join(SAMPLE, f) for f in os.listdir(SAMPLE) if f.endswith(".json"))

    def test_every_chart_of_the_sample_is_drawn_and_the_same_twice(self):
        expected = set()
        for path in self.samples():
            with open(path) as f:
                expected |= {p["file"] for p in json.load(f)["plots"]}
        self.assertGreaterEqual(len(expected), 5)
        first, second = self.out_dir("a"), self.out_dir("b")
        for out in (first, second):
            r = run(["--out", out] + self.samples())
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(set(os.listdir(out)), expected)
            self.assertEqual(sorted(r.stdout.split()), sorted(os.path.join(out, f) for f in expected))
        for name in expected:
            w, h = png_size(os.path.join(first, name))
            self.assertGreater(w, 100, name)
            self.assertGreater(h, 100, name)
            with open(os.path.join(first, name), "rb") as a, open(os.path.join(second, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), f"{name} differs between two runs on one input")

    def test_the_newest_run_wins_where_two_name_one_chart(self):
        with open(os.path.join(SAMPLE, "launch.json")) as f:
            doc = json.load(f)
        older = dict(doc, date="2026-01-01T00:00:00+0000")
        newer = json.loads(json.dumps(doc))
        newer["date"] = "2026-12-01T00:00:00+0000"
        for p in newer["plots"][0]["series"]["ctrun"]:
            p.update(median=p["median"] * 3, min=p["min"] * 3, max=p["max"] * 3)
        paths = {}
        for name, d in (("older", older), ("newer", newer)):
            paths[name] = os.path.join(self.tmp, name + ".json")
            with open(paths[name], "w") as f:
                json.dump(d, f)
        both, alone = self.out_dir("both"), self.out_dir("alone")
        self.assertEqual(run(["--out", both, paths["newer"], paths["older"]]).returncode, 0)
        self.assertEqual(run(["--out", alone, paths["newer"]]).returncode, 0)
        chart = doc["plots"][0]["file"]
        with open(os.path.join(both, chart), "rb") as a, open(os.path.join(alone, chart), "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_a_bad_file_is_one_line_and_exit_2_and_nothing_is_drawn(self):
        with open(os.path.join(SAMPLE, "fsdp.json")) as f:
            good = json.load(f)

        def broken(change):
            d = json.loads(json.dumps(good))
            change(d)
            return d

        cases = {
            "no plots": ({"bench": "x"}, r'no "plots" list'),
            "no median": (broken(lambda d: d["plots"][0]["series"]["DDP"][0].pop("median")),
                          r'plots\[0\]\.series\.DDP\[0\] has no "median"'),
            "min above median": (broken(lambda d: d["plots"][0]["series"]["DDP"][1].update(min=1e9)),
                                 r"plots\[0\]\.series\.DDP\[1\]: min ≤ median ≤ max does not hold"),
            "mixed x": (broken(lambda d: d["plots"][0]["series"]["DDP"][0].update(x=2)),
                        r"x mixes numbers and strings"),
            "path as file": (broken(lambda d: d["plots"][0].update(file="../escape.png")),
                             r"plots\[0\]\.file is '\.\./escape\.png'"),
            "nan": (broken(lambda d: d["plots"][0]["series"]["DDP"][0].update(median=float("nan"))),
                    r"median is nan: give a finite number"),
        }
        out = self.out_dir("bad")
        for name, (doc, pattern) in cases.items():
            with self.subTest(name):
                path = os.path.join(self.tmp, name.replace(" ", "_") + ".json")
                with open(path, "w") as f:
                    json.dump(doc, f)
                # A good file beside the bad one: still nothing is drawn.
                r = run(["--out", out, os.path.join(SAMPLE, "launch.json"), path])
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
                self.assertRegex(r.stderr, "^plot.py: " + re.escape(path) + ": ")
                self.assertRegex(r.stderr, pattern)
                self.assertEqual(os.listdir(out), [])
        r = run(["--out", os.path.join(self.tmp, "missing"), os.path.join(SAMPLE, "launch.json")])
        self.assertEqual(r.returncode, 2)
        self.assertIn("no such directory", r.stderr)

    def test_an_anchor_is_drawn_and_a_bad_one_refused(self):
        with open(os.path.join(SAMPLE, "rendezvous.json")) as f:
            doc = json.load(f)
        chart = doc["plots"][0]
        chart.update(log_x=True, log_y=True)
        plain = os.path.join(self.tmp, "plain.json")
        with open(plain, "w") as f:
            json.dump(doc, f)
        chart["anchors"] = [{"x": 4000, "y": 10.0, "label": "elsewhere: 10 s at 4k"}]
        anchored = os.path.join(self.tmp, "anchored.json")
        with open(anchored, "w") as f:
            json.dump(doc, f)
        a, b = self.out_dir("plain"), self.out_dir("anchored")
        self.assertEqual(run(["--out", a, plain]).returncode, 0)
        r = run(["--out", b, anchored])
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(a, chart["file"]), "rb") as x, open(os.path.join(b, chart["file"]), "rb") as y:
            self.assertNotEqual(x.read(), y.read(), "the anchor left the chart unchanged")
        bad = [({"x": 4000, "y": 0, "label": "zero"}, r"anchors\[0\]\.y is 0: a log axis"),
               ({"x": 4000, "y": 1.0}, r'anchors\[0\] needs x, y and a non-empty string "label"')]
        for k, (anchor, pattern) in enumerate(bad):
            chart["anchors"] = [anchor]
            with open(anchored, "w") as f:
                json.dump(doc, f)
            out = self.out_dir(f"bad{k}")
            r = run(["--out", out, anchored])
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertRegex(r.stderr, pattern)
            self.assertEqual(os.listdir(out), [])

    def test_every_image_docs_benchmarks_shows_exists(self):
        with open(os.path.join(ROOT, "docs", "benchmarks.md")) as f:
            text = f.read()
        images = re.findall(r"!\[[^\]]*\]\((img/[^)]+)\)", text)
        for rel in images:
            path = os.path.join(ROOT, "docs", rel)
            self.assertTrue(os.path.isfile(path), f"docs/benchmarks.md shows {rel}, which is missing")
            png_size(path)


if __name__ == "__main__":
    unittest.main()
