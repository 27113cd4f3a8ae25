"""One port per job (issue 18, part 3): with c10d and the agent store, the
workers' c10d store is reached through the rendezvous port alone, whether a
node's agent hosts the rendezvous or ctrund does.

Hosts are network namespaces with two networks: eth0, the control network,
whose iptables (in every host) pass no TCP but to and from the rendezvous
port; and eth1, a data network for Gloo's own connections
(GLOO_SOCKET_IFNAME=eth1). A store anywhere but on the rendezvous port is
unreachable over eth0, so the job can only finish if the store is there."""
import os
import subprocess
import unittest

import harness as h
import netns

PORT = 29400
CONF = "last_call_timeout=1,keep_alive_interval=0.5,keep_alive_max_attempt=4,join_timeout=60"
ON_PORT = "the workers' store is served on the rendezvous port"


class OnePortTest(unittest.TestCase):
    def setUp(self):
        if not netns.available():
            self.skipTest("needs root, ip and iptables for network namespaces")

    def hosts(self, count, subnet):
        hosts = netns.Hosts(count, subnet, f"op{os.getpid() % 100000}")
        self.addCleanup(hosts.down)
        hosts.up()
        hosts.add_lan(subnet.rsplit(".", 1)[0] + "." + str(int(subnet.rsplit(".", 1)[1]) + 1))
        for i in range(count):
            hosts.allow_only_tcp_port(i, PORT)
        return hosts

    def popen(self, hosts, i, argv, **kw):
        p = subprocess.Popen(hosts.command(i, argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        return p

    def run_job(self, hosts, endpoint):
        env = h.base_env(GLOO_SOCKET_IFNAME="eth1")
        agents = []
        for i in range(3):
            argv = [h.ctrun_bin(), "--nnodes", "3", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                    "--rdzv-endpoint", endpoint, "--rdzv-id", "oneport", "--local-addr", hosts.ip(i),
                    "--rdzv-conf", CONF, "--tee", "3", h.worker("allreduce.py")]
            agents.append(self.popen(hosts, i, argv, env=env))
        outs = h.finish(self, agents, 120)
        for p, (out, err) in zip(agents, outs):
            self.assertEqual(p.returncode, 0, err)
            self.assertIn(ON_PORT, err)
        allout = "".join(out for out, _ in outs)
        for rank in range(3):
            self.assertIn(f"rank {rank} world 3 sum 6", allout)

    def test_embedded_rendezvous_serves_the_store_on_its_port(self):
        hosts = self.hosts(3, "10.213.61")
        self.run_job(hosts, f"{hosts.ip(0)}:{PORT}")

    def test_ctrund_serves_the_store_on_its_port(self):
        hosts = self.hosts(4, "10.213.63")
        ctrund = os.path.join(h.build_dir(), "rendezvous", "ctrund")
        daemon = self.popen(hosts, 3, [ctrund, "--listen", f"0.0.0.0:{PORT}"])
        line = daemon.stdout.readline()  # "ctrund: serving rendezvous on 0.0.0.0:PORT": it listens
        self.assertIn("serving rendezvous", line)
        self.run_job(hosts, f"{hosts.ip(3)}:{PORT}")
        daemon.terminate()
        _, err = daemon.communicate(timeout=30)
        self.assertEqual(daemon.returncode, 0, err)


if __name__ == "__main__":
    unittest.main()
