"""Helpers for the tensor / pipeline / data parallel tests: run ctrun-gpt on
N ranks (the launcher's environment set by hand), read back the parameter
slices each mesh coordinate dumped, and rebuild the full model by name."""
import array
import glob
import json
import os
import re
import tempfile
import unittest

from trainer_test_util import binary, run_ranks_output

# A model small enough for 8 ranks on 2 cores, with every dimension
# divisible by 4 (tp up to 4) and 4 blocks (pp up to 4).
MODEL = ["--layers", "4", "--width", "32", "--heads", "4", "--seq-len", "16",
         "--global-batch", "16", "--optimizer", "sgd", "--lr", "0.2", "--momentum", "0.9",
         "--log-every", "1", "--seed", "5"]


def run_gpt(tool, world, args, timeout=180):
    """Runs `world` ranks of ctrun-gpt; returns [(code, stdout, stderr)] by rank."""
    return run_ranks_output([tool, *args], world, timeout=timeout)


def run_dumped(tool, tmpdir, name, world, args):
    """Runs `world` ranks of ctrun-gpt with `args` plus --dump-params into
    tmpdir/name; fails unless every rank exits 0. Returns (the full
    parameters by name, {step: loss}, [(code, stdout, stderr)] by rank)."""
    prefix = os.path.join(tmpdir, name)
    results = run_gpt(tool, world, [*args, "--dump-params", prefix])
    for rank, (code, _, err) in enumerate(results):
        if code != 0:
            raise AssertionError(f"{name}: rank {rank} exited {code}: {err[-2000:]}")
    step_losses = {}
    for _, out, _ in results:
        step_losses.update(losses(out))
    return full_params(prefix), step_losses, results


def losses(text):
    """{step: loss} from the reporting rank's 'step N loss X' lines."""
    return {int(s): float(v) for s, v in re.findall(r"^step (\d+) loss ([-0-9.e]+)", text, re.M)}


def full_params(prefix):
    """{name: (full shape, flat list of floats)} rebuilt from every
    PREFIX.pp*.tp*.{json,bin} dump (slices joined along their cut dimension)."""
    import torch
    pieces = {}
    for index_path in sorted(glob.glob(prefix + ".pp*.tp*.json")):
        with open(index_path) as f:
            entries = json.load(f)
        values = array.array("f")
        with open(index_path[:-5] + ".bin", "rb") as f:
            values.frombytes(f.read())
        offset = 0
        for e in entries:
            chunk = torch.tensor(values[offset:offset + e["numel"]])
            offset += e["numel"]
            pieces.setdefault(e["name"], {})[e["index"] if e["dim"] >= 0 else 0] = (e, chunk)
    params = {}
    for name, parts in pieces.items():
        e = parts[0][0]
        shape = e["full_shape"]
        if e["dim"] < 0 or e["parts"] == 1:
            params[name] = parts[0][1].view(shape)
            continue
        assert len(parts) == e["parts"], f"{name}: {len(parts)} of {e['parts']} slices"
        slice_shape = list(shape)
        slice_shape[e["dim"]] //= e["parts"]
        params[name] = torch.cat([parts[i][1].view(slice_shape) for i in range(e["parts"])], e["dim"])
    return params


def worst_difference(a, b):
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def check_ok(testcase, results, what):
    for rank, (code, out, err) in enumerate(results):
        testcase.assertEqual(code, 0, f"{what}: rank {rank} exited {code}: {err[-2000:]}")


def gpt_tool():
    return binary("trainer/apps/ctrun-gpt")


class GptLayoutTest(unittest.TestCase):
    """A test class of ctrun-gpt layouts against one process: setUpClass runs
    the single-process reference through the subclass's run_layout (as
    self.reference) in a temporary directory (self.tmp) removed afterwards."""

    @classmethod
    def setUpClass(cls):
        cls.tool = gpt_tool()
        cls.tmp = tempfile.TemporaryDirectory()
        cls.reference = cls.run_layout(cls, "single", 1, ["--micro-batches", "1"])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()
