"""What the podman tests share (test_container.py, test_kube.py): running
podman, the limits it can apply here, ctrun's image built from this tree, a
private network with its subnet blackholed, and sweeping what a killed run
left behind."""
import os
import re
import resource
import subprocess

import harness as h

SOURCE = os.environ.get("CTRUN_SOURCE_DIR", os.path.dirname(os.path.dirname(h.HERE)))
IMAGE_SH = os.path.join(SOURCE, "scripts", "container", "image.sh")
# The same base for the ordinary and the ASan build (whose binaries load these).
BASE_EXTRA = "libasan8 libubsan1"


def podman(*args, timeout=60, check=True, env=None):
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, check=check, env=env)


def limits():
    """(nofile, nproc) podman can apply here. Rootful podman asks for
    nofile=nproc=1048576 in the container (and lowers its own RLIMIT_NPROC to
    32768); without CAP_SYS_RESOURCE, as in this VM, the runtime cannot raise
    a hard limit and `podman run` fails with `setrlimit ... Operation not
    permitted` (docs/kubernetes.md). Asking for at most our own hard limits
    always works."""
    def cap(res, most):
        hard = resource.getrlimit(res)[1]
        return most if hard == resource.RLIM_INFINITY else min(hard, most)
    return cap(resource.RLIMIT_NOFILE, 1048576), cap(resource.RLIMIT_NPROC, 32768)


def ulimits():
    """limits() as `podman run` flags."""
    nofile, nproc = limits()
    return ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]


def build_image():
    """ctrun's image from this build (scripts/container/image.sh --from
    host; cached by content): its name, localhost/ctrun:<key>."""
    env = dict(os.environ, CTRUN_CONTAINER_PACKAGES=BASE_EXTRA)
    built = subprocess.run([IMAGE_SH, "--from", os.environ.get("CTRUN_CONTAINER_BASE", "host"), h.build_dir()],
                           capture_output=True, text=True, timeout=600, env=env)
    if built.returncode != 0:
        raise RuntimeError(f"image.sh failed:\n{built.stderr}")
    return built.stdout.strip().splitlines()[-1]


def create_network(name, subnet):
    """An --internal network (no route out) without podman's DNS (aardvark
    does not start here), its /24 `subnet` (three octets) blackholed in the
    root namespace first (../shared/notes/machine.md)."""
    subprocess.run(["ip", "route", "replace", "blackhole", f"{subnet}.0/24"], check=True)
    try:
        podman("network", "create", "--internal", "--disable-dns", "--subnet", f"{subnet}.0/24", name)
    except BaseException:
        remove_network(name, subnet)
        raise


def remove_network(name, subnet):
    podman("network", "rm", "-f", name, check=False)
    subprocess.run(["ip", "route", "del", "blackhole", f"{subnet}.0/24"], capture_output=True)


def dead(name, prefix):
    """True when `name` is `<prefix><pid>...` of a process that is gone."""
    m = re.match(re.escape(prefix) + r"(\d+)", name)
    return bool(m) and not os.path.exists(f"/proc/{m.group(1)}")


def sweep_stale(prefix):
    """Removes the containers, pods, networks and routes named
    `<prefix><pid>...` of earlier runs whose process is gone (killed by a
    CTest timeout, say: containers outlive the podman command that started
    them)."""
    names = podman("ps", "-a", "--filter", f"name=^{prefix}", "--format", "{{.Names}}", check=False).stdout.split()
    stale = [n for n in names if dead(n, prefix)]
    if stale:
        podman("rm", "-f", "-t", "0", *stale, check=False)
    for net in podman("network", "ls", "--format", "{{.Name}}", check=False).stdout.split():
        if dead(net, prefix):
            subnet = podman("network", "inspect", "--format", "{{range .Subnets}}{{.Subnet}}{{end}}", net,
                            check=False).stdout.strip()
            podman("network", "rm", "-f", net, check=False)
            if subnet:
                subprocess.run(["ip", "route", "del", "blackhole", subnet], capture_output=True)
