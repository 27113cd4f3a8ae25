"""The pods Kubeflow renders for the docs' TrainJob and PyTorchJob
(docs/k8s/, checked against docs/kubernetes.md by test_kube_manifests.py),
played for real with `podman kube play` on one podman network, with ctrun's
image built from this tree: each set is two pods x 2 workers that find each
other by the names the operator's headless Services give them, train
ctrun-fashion-mnist (the image's trainer, 4 steps) at world size 4 and exit
0; `podman kube down` then removes them.

What the test changes in the rendered pods, and why (nothing else):
* the image: the one scripts/container/image.sh built from this tree;
* restartPolicy Never (the operators' OnFailure): a failing ctrun shows as
  its exit code instead of being restarted until the deadline;
* no `ports`: podman 4.3 publishes every containerPort on the host (two
  pods with port 23456 collide), where Kubernetes publishes none without a
  hostPort;
* hostAliases standing in for the headless Services' DNS records (podman's
  aardvark-dns does not start here, and podman ignores `subdomain`): every
  pod's /etc/hosts maps the names those Services give each pod
  (`<hostname>.<subdomain>[.default.svc[.cluster.local]]` for a TrainJob,
  `<pod>[.default.svc[.cluster.local]]` for a PyTorchJob) to the static IP
  the test gives that pod with `kube play --ip`. ctrun (gRPC's resolver,
  Gloo) reads /etc/hosts as it would read DNS answers.
Everything else (env with its fieldRef, command, args, hostname, resources)
is played as rendered.

podman needs two things here (../shared/notes/machine.md): `catatonit` for
the pods' pause image, and a containers.conf (CONTAINERS_CONF) whose
default_ulimits stay within the caller's hard limits, or every infra
container fails with `error setting rlimit type 7`. The network is
--internal and its subnet blackholed in the root namespace first. Plain
build only (PLAIN_ONLY): it tests the manifests and the image, not memory
safety. Skipped only without root or podman."""
import copy
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

import yaml

import containers as c
import kube_pods as k
from containers import podman

PREFIX = "ctrun-kube-"
NAMESPACE = "default"
CATATONIT = "/usr/libexec/podman/catatonit"
PLAY_TIMEOUT = 120   # s: creating two pods
TRAIN_TIMEOUT = 240  # s: both pods' ctrun exit (~15-30 s; loading libtorch dominates)


def service_names(kind, pod):
    """The DNS names the operator's headless Service(s) give `pod`."""
    spec = pod["spec"]
    base = f"{spec['hostname']}.{spec['subdomain']}" if kind == "TrainJob" else pod["metadata"]["name"]
    return [base, f"{base}.{NAMESPACE}.svc", f"{base}.{NAMESPACE}.svc.cluster.local"]


def for_podman(kind, pods, image, ips):
    """`pods` as this test plays them (the module's docstring says what
    changes and why)."""
    aliases = [{"ip": ip, "hostnames": service_names(kind, p)} for p, ip in zip(pods, ips)]
    out = []
    for pod in pods:
        pod = copy.deepcopy(pod)
        spec = pod["spec"]
        spec["restartPolicy"] = "Never"
        spec["hostAliases"] = aliases
        for ctr in spec["containers"]:
            ctr["image"] = image
            ctr.pop("ports", None)
        out.append(pod)
    return out


def container_names(pods):
    """podman kube play names each container `<pod>-<container>`."""
    return [f"{p['metadata']['name']}-{ctr['name']}" for p in pods for ctr in p["spec"]["containers"]]


class KubePlayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0 or not shutil.which("podman"):
            raise unittest.SkipTest("needs root and podman (scripts/install-deps.sh installs it)")
        if not os.path.exists(CATATONIT):
            raise RuntimeError(f"{CATATONIT} not found: podman's pods need catatonit for their pause image "
                               "(scripts/install-deps.sh installs it)")
        c.sweep_stale(PREFIX)
        start = time.monotonic()
        cls.image = c.build_image()
        print(f"\n{cls.image} ready in {time.monotonic() - start:.0f} s", flush=True)
        cls.tmp = tempfile.mkdtemp(prefix=PREFIX)
        cls.net = f"{PREFIX}{os.getpid()}"
        cls.subnet = f"10.232.{100 + os.getpid() % 100}"
        nofile, nproc = c.limits()
        cls.conf = os.path.join(cls.tmp, "containers.conf")
        with open(cls.conf, "w") as f:
            f.write(f'[containers]\ndefault_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n')
        try:
            c.create_network(cls.net, cls.subnet)
        except BaseException:
            shutil.rmtree(cls.tmp, True)
            raise

    @classmethod
    def tearDownClass(cls):
        c.remove_network(cls.net, cls.subnet)
        shutil.rmtree(cls.tmp, True)

    def kube(self, *args, timeout=60, check=True):
        return podman("kube", *args, timeout=timeout, check=check, env=dict(os.environ, CONTAINERS_CONF=self.conf))

    def play(self, kind):
        """Plays the pods of `kind` until every container has exited; returns
        ({container: exit code}, {container: its output}), after `podman
        kube down` removed the pods."""
        pods = k.rendered(kind)
        ips = [f"{self.subnet}.{10 + i}" for i in range(len(pods))]
        played = for_podman(kind, pods, self.image, ips)
        path = os.path.join(self.tmp, f"{kind}.yaml")
        with open(path, "w") as f:
            yaml.safe_dump_all(played, f)
        names = container_names(played)
        pod_names = [p["metadata"]["name"] for p in played]
        # Pods of the same names left by a run that was killed.
        podman("pod", "rm", "-f", "-t", "0", *pod_names, check=False)
        self.addCleanup(self.kube, "down", path, check=False)
        argv = ["play", "--network", self.net]
        for ip in ips:
            argv += ["--ip", ip]
        self.kube(*argv, path, timeout=PLAY_TIMEOUT)
        try:
            waited = podman("wait", *names, timeout=TRAIN_TIMEOUT)
        except subprocess.TimeoutExpired:
            tails = "\n".join(f"--- {n}\n{self.output(n)[-3000:]}" for n in names)
            self.fail(f"{kind}: not every pod exited within {TRAIN_TIMEOUT} s:\n{tails}")
        codes = dict(zip(names, (int(x) for x in waited.stdout.split())))
        logs = {n: self.output(n) for n in names}
        # A pod stops (its infra container exits) once all its containers
        # have exited (kube play's exit policy): wait for that, bounded.
        infra = [podman("pod", "inspect", "--format", "{{.InfraContainerID}}", p).stdout.strip() for p in pod_names]
        podman("wait", *infra, timeout=30)
        states = {p: podman("pod", "inspect", "--format", "{{.State}}", p).stdout.strip() for p in pod_names}
        self.assertEqual(states, {p: "Exited" for p in pod_names})
        down = self.kube("down", path, check=False)
        self.assertEqual(down.returncode, 0, down.stderr)
        for p in pod_names:
            self.assertNotEqual(podman("pod", "exists", p, check=False).returncode, 0, f"{p} left after kube down")
        return codes, logs

    def output(self, name):
        out = podman("logs", name, check=False)
        return out.stdout + out.stderr

    def check_training(self, kind, codes, logs):
        names = list(codes)
        self.assertEqual(list(codes.values()), [0] * len(names),
                         "\n".join(f"--- {n} exited {codes[n]}\n{logs[n][-3000:]}" for n in names))
        for rank, n in enumerate(names):
            self.assertIn(f"round 0 complete: 2 nodes, world size 4, this node is group rank {rank}", logs[n], n)
        # Rank 0 (on node 0) logs the training.
        self.assertIn("4 ranks (gloo)", logs[names[0]])
        self.assertEqual(re.findall(r"epoch 0 step (\d+):", logs[names[0]]), ["1", "2", "3", "4"], logs[names[0]])
        self.assertIn("done: 4 steps", logs[names[0]])

    def test_trainjob_pods_train_at_world_size_4(self):
        codes, logs = self.play("TrainJob")
        self.check_training("TrainJob", codes, logs)

    def test_pytorchjob_pods_train_at_world_size_4(self):
        codes, logs = self.play("PyTorchJob")
        self.check_training("PyTorchJob", codes, logs)


if __name__ == "__main__":
    unittest.main()
