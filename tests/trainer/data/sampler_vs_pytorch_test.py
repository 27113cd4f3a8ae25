"""DistributedSampler index lists equal PyTorch's
torch.utils.data.distributed.DistributedSampler for the same (size, replicas,
rank, seed, epoch, shuffle, drop_last), generated here with /usr/bin/python3 +
torch. Also checks the mid-epoch re-shard (consumed > 0) against the rule the
C++ side documents, computed from PyTorch's own permutation."""
import math
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/trainer's helpers
from trainer_test_util import binary

CASES = [
    # n, replicas, seed, epoch, shuffle, drop_last
    (10, 1, 0, 0, 1, 0), (10, 3, 0, 0, 1, 0), (10, 3, 0, 0, 1, 1), (10, 4, 42, 3, 1, 0),
    (7, 4, 1, 1, 1, 1), (3, 8, 5, 0, 1, 0), (1000, 4, 1234, 7, 1, 0), (1001, 4, 1234, 7, 1, 1),
    (60000, 4, 0, 2, 1, 0), (60000, 3, 17, 0, 0, 0), (11, 2, 9, 4, 0, 1),
]


def pytorch_lists(n, replicas, seed, epoch, shuffle, drop_last):
    import torch
    from torch.utils.data.distributed import DistributedSampler
    out = []
    for rank in range(replicas):
        s = DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=bool(shuffle),
                               seed=seed, drop_last=bool(drop_last))
        s.set_epoch(epoch)
        out.append(list(s))
    return out


def resharded_lists(n, replicas, seed, epoch, drop_last, consumed):
    """The documented resume rule, built from PyTorch's epoch permutation."""
    import torch
    g = torch.Generator()
    g.manual_seed(seed + epoch)
    rest = torch.randperm(n, generator=g).tolist()[consumed:]
    m = len(rest)
    if m == 0:
        return [[] for _ in range(replicas)]
    per = math.ceil((m - replicas) / replicas) if drop_last and m % replicas else math.ceil(m / replicas)
    total = per * replicas
    padded = (rest * math.ceil(total / m))[:total]
    return [padded[r:total:replicas] for r in range(replicas)]


def cxx_lists(tool, lines):
    text = "".join(" ".join(map(str, line)) + "\n" for line in lines)
    out = subprocess.run([tool, "sampler"], input=text, capture_output=True, text=True,
                         check=True, timeout=120).stdout
    blocks = []
    for block in out.strip("\n").split("\n\n"):
        ranks = []
        for row in block.splitlines():
            _, _, rest = row.partition(":")
            ranks.append([int(v) for v in rest.split()])
        blocks.append(ranks)
    return blocks


class SamplerVsPytorchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tool = binary("tests/trainer/trainer_ddp_check")

    def test_index_lists_equal_pytorch(self):
        got = cxx_lists(self.tool, [c + (0,) for c in CASES])
        self.assertEqual(len(got), len(CASES))
        for case, lists in zip(CASES, got):
            with self.subTest(case=case):
                self.assertEqual(lists, pytorch_lists(*case))

    def test_a_different_epoch_differs(self):
        got = cxx_lists(self.tool, [(1000, 4, 1234, 8, 1, 0, 0)])[0]
        self.assertNotEqual(got, pytorch_lists(1000, 4, 1234, 7, 1, 0))

    def test_resume_reshards_the_rest(self):
        # 2 ranks x batch 8 x 5 steps consumed 80; resume on 3 ranks.
        lines = [(1000, 3, 1234, 7, 1, 0, 80), (1001, 4, 3, 0, 1, 1, 333), (50, 4, 0, 0, 1, 0, 50)]
        got = cxx_lists(self.tool, lines)
        for line, lists in zip(lines, got):
            n, replicas, seed, epoch, _, drop_last, consumed = line
            with self.subTest(line=line):
                self.assertEqual(lists, resharded_lists(n, replicas, seed, epoch, drop_last, consumed))


if __name__ == "__main__":
    unittest.main()
