"""`--nnodes 1 --rdzv-backend c10d --rdzv-endpoint HOST:PORT` uses the
endpoint, as torchrun does: the one node registers with the rendezvous there
(a ctrund here), so the job shows in its /api/runs and metrics, and the
workers' store is served on that port (one port per job). Without an
explicit endpoint, one node stays in-process: the daemon never hears of it.
"""
import json
import re
import unittest
import urllib.request

import harness as h

# Prints the workers' store address, then exits 0.
SHOW = ["--no-python", "/bin/sh", "-c", 'echo "store=$MASTER_ADDR:$MASTER_PORT rank=$RANK/$WORLD_SIZE"']


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


class OneNodeEndpointTest(unittest.TestCase):
    def setUp(self):
        daemon = h.Ctrund(self)
        self.endpoint, self.page = daemon.endpoint, daemon.page

    def run_ids(self):
        return [r["run_id"] for r in json.loads(get(self.page + "api/runs"))["runs"]]

    def test_the_one_node_registers_with_the_endpoint(self):
        r = h.run(["--nnodes", "1", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
                   "--rdzv-endpoint", self.endpoint, "--rdzv-id", "solo", *SHOW], timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        stores = set(re.findall(r"store=(\S+) rank=\d/2", r.stdout))
        self.assertEqual(stores, {self.endpoint}, r.stdout)  # the rendezvous port serves the store
        self.assertIn("solo", self.run_ids())
        self.assertIn('"solo"', get(self.page + "metrics"))

    def test_the_endpoint_from_pet_counts_too(self):
        env = h.base_env(PET_NNODES="1", PET_RDZV_BACKEND="c10d", PET_RDZV_ENDPOINT=self.endpoint,
                         PET_RDZV_ID="solo-env")
        r = h.run(SHOW, env=env, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("solo-env", self.run_ids())

    def test_without_an_endpoint_one_node_stays_in_process(self):
        for args in (["--nnodes", "1", "--rdzv-id", "local-static"],
                     ["--standalone", "--rdzv-backend", "c10d", "--rdzv-endpoint", self.endpoint,
                      "--rdzv-id", "local-standalone"]):
            with self.subTest(args=args):
                r = h.run([*args, *SHOW], timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                [store] = set(re.findall(r"store=(\S+) rank=0/1", r.stdout))
                self.assertNotEqual(store, self.endpoint)
        self.assertEqual(self.run_ids(), [])


if __name__ == "__main__":
    unittest.main()
