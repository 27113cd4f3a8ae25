"""Test hosts as network namespaces on a private bridge (root only).

Before anything else the test subnet is blackholed in the root namespace, so a
command that forgets to enter a namespace fails locally instead of sending
packets off the machine. Hosts can reach only each other."""
import os
import shutil
import subprocess


def available():
    return os.geteuid() == 0 and shutil.which("ip") is not None and shutil.which("iptables") is not None


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


class Hosts:
    def __init__(self, count, subnet, prefix):
        self.count = count
        self.subnet = subnet
        self.prefix = prefix
        self.switch = f"{prefix}-sw"
        self.names = [f"{prefix}-h{i}" for i in range(1, count + 1)]

    def ip(self, i):
        return f"{self.subnet}.{i + 1}"

    def up(self):
        sh("ip", "route", "replace", "blackhole", f"{self.subnet}.0/24")
        sh("ip", "netns", "add", self.switch)
        sh("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.switch, "link", "set", "br0", "up")
        for i, ns in enumerate(self.names):
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", f"p{i}")
            sh("ip", "-n", ns, "link", "set", f"p{i}", "netns", self.switch)
            sh("ip", "-n", self.switch, "link", "set", f"p{i}", "master", "br0")
            sh("ip", "-n", self.switch, "link", "set", f"p{i}", "up")
            sh("ip", "-n", ns, "addr", "add", f"{self.ip(i)}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")

    def down(self):
        for ns in self.names + [self.switch]:
            sh("ip", "netns", "del", ns, check=False)
        sh("ip", "route", "del", "blackhole", f"{self.subnet}.0/24", check=False)

    def command(self, i, argv):
        """argv run inside host i's network namespace."""
        return ["nsenter", f"--net=/run/netns/{self.names[i]}", "--"] + list(argv)

    def partition(self, i):
        """Drops every packet to and from host i (its eth0)."""
        for chain in ("INPUT", "OUTPUT"):
            sh("ip", "netns", "exec", self.names[i], "iptables", "-A", chain, "-i" if chain == "INPUT" else "-o",
               "eth0", "-j", "DROP")
