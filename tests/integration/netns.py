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
        self.lans = []

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

    def add_lan(self, subnet):
        """A second network, eth1 in every host on `subnet` (blackholed in the
        root namespace first, as the first): e.g. a data network for Gloo
        (GLOO_SOCKET_IFNAME=eth1) beside a firewalled control network."""
        self.lans.append(subnet)
        sh("ip", "route", "replace", "blackhole", f"{subnet}.0/24")
        sh("ip", "-n", self.switch, "link", "add", "br1", "type", "bridge")
        sh("ip", "-n", self.switch, "link", "set", "br1", "up")
        for i, ns in enumerate(self.names):
            sh("ip", "-n", ns, "link", "add", "eth1", "type", "veth", "peer", "name", f"q{i}")
            sh("ip", "-n", ns, "link", "set", f"q{i}", "netns", self.switch)
            sh("ip", "-n", self.switch, "link", "set", f"q{i}", "master", "br1")
            sh("ip", "-n", self.switch, "link", "set", f"q{i}", "up")
            sh("ip", "-n", ns, "addr", "add", f"{subnet}.{i + 1}/24", "dev", "eth1")
            sh("ip", "-n", ns, "link", "set", "eth1", "up")

    def allow_only_tcp_port(self, i, port):
        """Host i's eth0 passes no TCP but to and from `port` (iptables in its
        namespace, stateless: replies come from `port`)."""
        ns = self.names[i]
        for chain, dev, ours, theirs in (("INPUT", "-i", "--dport", "--sport"),
                                         ("OUTPUT", "-o", "--sport", "--dport")):
            sh("ip", "netns", "exec", ns, "iptables", "-A", chain, dev, "eth0", "-p", "tcp", ours, str(port),
               "-j", "ACCEPT")
            sh("ip", "netns", "exec", ns, "iptables", "-A", chain, dev, "eth0", "-p", "tcp", theirs, str(port),
               "-j", "ACCEPT")
            sh("ip", "netns", "exec", ns, "iptables", "-A", chain, dev, "eth0", "-p", "tcp", "-j", "DROP")

    def down(self):
        for ns in self.names + [self.switch]:
            sh("ip", "netns", "del", ns, check=False)
        for subnet in [self.subnet] + self.lans:
            sh("ip", "route", "del", "blackhole", f"{subnet}.0/24", check=False)

    def command(self, i, argv):
        """argv run inside host i's network namespace."""
        return ["nsenter", f"--net=/run/netns/{self.names[i]}", "--"] + list(argv)

    def partition(self, i, op="-A"):
        """Drops every packet to and from host i (its eth0)."""
        for chain in ("INPUT", "OUTPUT"):
            sh("ip", "netns", "exec", self.names[i], "iptables", op, chain, "-i" if chain == "INPUT" else "-o",
               "eth0", "-j", "DROP")

    def cap_tcp_retransmission(self, ms=1000):
        """Caps TCP's retransmission timeout at `ms` in every host
        (net.ipv4.tcp_rto_max_ms, per namespace, Linux 6.15 and later), so a
        connection whose packets a partition dropped retries within `ms` of
        the heal, not after its exponential backoff (tens of seconds by
        then). Applies to sockets made afterwards. False where the kernel
        has no such setting (nothing is changed)."""
        if not os.path.exists("/proc/sys/net/ipv4/tcp_rto_max_ms"):
            return False
        for ns in self.names:
            sh("nsenter", f"--net=/run/netns/{ns}", "--", "sysctl", "-q", "-w", f"net.ipv4.tcp_rto_max_ms={ms}")
        return True

    def heal(self, i):
        """Ends partition(i): its two rules are deleted."""
        self.partition(i, op="-D")
