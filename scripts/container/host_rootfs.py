#!/usr/bin/python3
"""Writes a Debian root filesystem tarball made of this host's installed
packages: the Essential ones plus PACKAGEs, with everything they depend on
(Depends, Pre-Depends) — the set `mmdebstrap --variant=essential --include`
installs — taken file by file from the host (dpkg's own file lists), with the
host's alternatives for them, a filtered dpkg status database and base-passwd's
users. No download, no maintainer script: seconds instead of minutes, and the
same package versions as the binaries were built and tested against.

  host_rootfs.py OUT.tar PACKAGE...     (root; prints the package count)
  host_rootfs.py --versions PACKAGE...  (prints "name version" of that set)

Documentation, man pages and translations are left out, as base.sh's
mmdebstrap build does. Fails (exit 1) when a PACKAGE is not installed."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

STATUS = "/var/lib/dpkg/status"
INFO = "/var/lib/dpkg/info"
ALTERNATIVES = "/var/lib/dpkg/alternatives"
SKIP = ("/usr/share/doc/", "/usr/share/man/", "/usr/share/locale/", "/usr/share/info/")


def installed_stanzas():
    with open(STATUS, encoding="utf-8") as f:
        for stanza in f.read().split("\n\n"):
            fields, last = {}, None
            for line in stanza.splitlines():
                if line[:1] in (" ", "\t") and last:
                    fields[last] += "\n" + line
                elif ":" in line:
                    last, value = line.split(":", 1)
                    fields[last] = value.strip()
            if fields.get("Status") == "install ok installed":
                yield fields, stanza


def closure(roots, packages, provides):
    """Names of `roots` and every package they need, through Depends and
    Pre-Depends; of alternatives, the first one installed."""
    chosen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in chosen:
            continue
        chosen.add(name)
        fields = packages[name]
        deps = ",".join(fields.get(k, "") for k in ("Pre-Depends", "Depends"))
        for dep in filter(None, (d.strip() for d in deps.split(","))):
            for alt in dep.split("|"):
                alt = re.sub(r"\(.*?\)|\[.*?\]|<.*?>", "", alt).strip().split(":")[0]
                found = alt if alt in packages else next(iter(provides.get(alt, [])), None)
                if found:
                    todo.append(found)
                    break
    return chosen


def canonical(path):
    """`path` with its parent directories resolved (/bin/bash → /usr/bin/bash
    on a merged-/usr system), the last component kept as it is."""
    parent, base = os.path.split(path)
    return os.path.join(os.path.realpath(parent), base) if base else path


def info_files(name, arch):
    for key in (f"{name}:{arch}", name):
        if os.path.exists(os.path.join(INFO, key + ".list")):
            return [os.path.join(INFO, f) for f in os.listdir(INFO) if f.rsplit(".", 1)[0] == key]
    raise SystemExit(f"host_rootfs: no file list for installed package {name}")


def alternatives(paths):
    """Symlinks of every alternative (master and slaves) whose chosen target
    is one of `paths`."""
    links = []
    for name in os.listdir(ALTERNATIVES):
        with open(os.path.join(ALTERNATIVES, name)) as f:
            lines = f.read().split("\n")
        pairs = [(name, lines[1])]
        i = 2
        while i + 1 < len(lines) and lines[i]:
            pairs.append((lines[i], lines[i + 1]))
            i += 2
        for alt, link in pairs:
            etc = "/etc/alternatives/" + alt
            if os.path.islink(etc) and canonical(os.path.realpath(etc)) in paths and os.path.lexists(link):
                links += [etc, canonical(link)]
    return links


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    out, wanted = sys.argv[1], sys.argv[2:]
    packages, provides, stanzas = {}, {}, {}
    for fields, stanza in installed_stanzas():
        name = fields["Package"]
        packages[name], stanzas[name] = fields, stanza
        for p in filter(None, (x.strip() for x in fields.get("Provides", "").split(","))):
            provides.setdefault(p.split(" ")[0].split(":")[0], []).append(name)
    missing = [p for p in wanted if p not in packages]
    if missing:
        raise SystemExit(f"host_rootfs: not installed on this host: {' '.join(missing)}")
    roots = [n for n, f in packages.items() if f.get("Essential") == "yes"] + wanted
    chosen = closure(roots, packages, provides)
    if out == "--versions":  # base.sh's cache key
        print("\n".join(f"{n} {packages[n]['Version']}" for n in sorted(chosen)))
        return

    paths, meta = set(), []
    for name in sorted(chosen):
        info = info_files(name, packages[name].get("Architecture", ""))
        meta += info
        with open([f for f in info if f.endswith(".list")][0]) as f:
            for line in f.read().splitlines():
                if line and line != "/." and not line.startswith(SKIP) and os.path.lexists(line):
                    paths.add(canonical(line))
    paths |= set(alternatives(paths))
    # Directories that dpkg's lists name through a symlink (/bin) are added
    # resolved; the merged-/usr symlinks themselves come from the host.
    tops = [p for p in ("/bin", "/sbin", "/lib", "/lib64") if os.path.islink(p)]

    stage = tempfile.mkdtemp(prefix="ctrun-rootfs-")
    try:
        for d in ("var/lib/dpkg/info", "etc", "workspace"):
            os.makedirs(f"{stage}/{d}")
        with open(f"{stage}/var/lib/dpkg/status", "w", encoding="utf-8") as f:
            f.write("\n\n".join(stanzas[n] for n in sorted(chosen)) + "\n")
        for m in meta:
            shutil.copy2(m, f"{stage}/var/lib/dpkg/info/")
        for name in ("passwd", "group"):  # as base-passwd's postinst makes them
            shutil.copy(f"/usr/share/base-passwd/{name}.master", f"{stage}/etc/{name}")
        if os.path.exists("/etc/ld.so.cache"):
            shutil.copy("/etc/ld.so.cache", f"{stage}/etc/ld.so.cache")
        # One archive, each path once (podman import refuses duplicates): the
        # host's files, then (tar's -C line) the staged ones not among them.
        staged = []
        for root, dirs, files in os.walk(stage):
            for n in sorted(dirs) + sorted(files):
                rel = os.path.relpath(os.path.join(root, n), stage)
                if "/" + rel not in paths:
                    staged.append(rel)
        listing = stage + ".files"
        with open(listing, "w") as f:
            f.write("\n".join([p.lstrip("/") for p in tops + sorted(paths - set(tops))] + [f"-C {stage}"] + staged) + "\n")
        subprocess.run(["tar", "-cf", out, "--no-recursion", "-C", "/", "-T", listing], check=True)
        os.remove(listing)
    finally:
        shutil.rmtree(stage)
    print(len(chosen))


if __name__ == "__main__":
    main()
