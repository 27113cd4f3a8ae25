#!/usr/bin/env python3
"""Writes the hwloc XML topologies the NUMA placement tests read.

Run it from this folder (python3 make_topologies.py) after changing it; the
XML files are committed. Each machine: 2 packages x 2 NUMA nodes x 2 L3
domains x 4 cores (8 cores per NUMA node, 32 in all), with or without SMT.
CPUs are numbered as Linux numbers them: core c's first thread is CPU c, its
sibling (SMT on) CPU c + 32.

GPUs are PCI devices of vendor 0x10de, class 0x0302, attached to a NUMA
node's group, with bus numbers that do not follow the tree's order (the
reader must sort them by PCI bus id). Each file also holds devices that are
not GPUs: an NVIDIA NVSwitch (class 0x0680) and an ASPEED VGA (vendor 0x1a03).
"""
import sys

CORES_PER_L3 = 4
L3_PER_NODE = 2
NODES_PER_PACKAGE = 2
PACKAGES = 2
CORES = CORES_PER_L3 * L3_PER_NODE * NODES_PER_PACKAGE * PACKAGES  # 32


def mask(cpus):
    """hwloc's bitmap text: 32-bit words, most significant first."""
    value = 0
    for c in cpus:
        value |= 1 << c
    words = []
    while True:
        words.append(value & 0xFFFFFFFF)
        value >>= 32
        if not value:
            break
    return ",".join("0x%08x" % w for w in reversed(words))


class Writer:
    def __init__(self):
        self.lines = []
        self.gp = 1

    def open(self, depth, type_, cpus, nodes, extra=""):
        self.gp += 1
        self.lines.append(
            '%s<object type="%s"%s cpuset="%s" complete_cpuset="%s" nodeset="%s" complete_nodeset="%s" gp_index="%d">'
            % ("  " * depth, type_, extra, mask(cpus), mask(cpus), mask(nodes), mask(nodes), self.gp))

    def close(self, depth):
        self.lines.append("%s</object>" % ("  " * depth))

    def leaf(self, depth, text):
        self.gp += 1
        self.lines.append("%s%s" % ("  " * depth, text.replace("GP", str(self.gp))))


def pci(busid, klass, vendor, device):
    return ('<object type="PCIDev" gp_index="GP" pci_busid="%s" pci_type="%04x [%04x:%04x] [%04x:0000] a1" '
            'pci_link_speed="0.000000"/>' % (busid, klass, vendor, device, vendor))


def machine(smt, gpus_by_node, others_by_node, gpu_device=lambda busid: 0x2330):
    threads = 2 if smt else 1

    def cpus_of_cores(cores):
        return [c + 32 * t for c in cores for t in range(threads)]

    w = Writer()
    all_cpus = cpus_of_cores(range(CORES))
    all_nodes = range(PACKAGES * NODES_PER_PACKAGE)
    w.lines.append('<?xml version="1.0" encoding="UTF-8"?>')
    w.lines.append('<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
    w.lines.append('<topology version="2.0">')
    w.open(1, "Machine", all_cpus, all_nodes,
           ' os_index="0" allowed_cpuset="%s" allowed_nodeset="%s"' % (mask(all_cpus), mask(all_nodes)))
    core = 0
    for p in range(PACKAGES):
        p_nodes = [p * NODES_PER_PACKAGE + n for n in range(NODES_PER_PACKAGE)]
        p_cores = range(p * CORES // PACKAGES, (p + 1) * CORES // PACKAGES)
        w.open(2, "Package", cpus_of_cores(p_cores), p_nodes, ' os_index="%d"' % p)
        for node in p_nodes:
            n_cores = range(node * 8, node * 8 + 8)
            n_cpus = cpus_of_cores(n_cores)
            w.open(3, "Group", n_cpus, [node], ' kind="1001" subkind="0"')
            w.open(4, "NUMANode", n_cpus, [node], ' os_index="%d" local_memory="1073741824"' % node)
            w.close(4)
            for _ in range(L3_PER_NODE):
                l3_cores = range(core, core + CORES_PER_L3)
                w.open(4, "L3Cache", cpus_of_cores(l3_cores), [node],
                       ' cache_size="16777216" depth="3" cache_linesize="64" cache_associativity="0" cache_type="0"')
                for c in l3_cores:
                    w.open(5, "Core", cpus_of_cores([c]), [node], ' os_index="%d"' % c)
                    for cpu in cpus_of_cores([c]):
                        w.leaf(6, '<object type="PU" os_index="%d" cpuset="%s" complete_cpuset="%s" nodeset="%s" '
                                  'complete_nodeset="%s" gp_index="GP"/>'
                               % (cpu, mask([cpu]), mask([cpu]), mask([node]), mask([node])))
                    w.close(5)
                w.close(4)
                core += CORES_PER_L3
            for busid in gpus_by_node.get(node, []):
                w.leaf(4, pci(busid, 0x0302, 0x10de, gpu_device(busid)))
            for text in others_by_node.get(node, []):
                w.leaf(4, text)
            w.close(3)
        w.close(2)
    w.close(1)
    w.lines.append("</topology>")
    return "\n".join(w.lines) + "\n"


# Two GPUs per NUMA node. In PCI bus id order (18, 2a, 3a, 5d, 9a, ab, ba,
# db) GPU i lives on NUMA node 0, 1, 0, 1, 2, 2, 3, 3.
EIGHT = {0: ["0000:3a:00.0", "0000:18:00.0"], 1: ["0000:2a:00.0", "0000:5d:00.0"],
         2: ["0000:9a:00.0", "0000:ab:00.0"], 3: ["0000:db:00.0", "0000:ba:00.0"]}
# Two GPUs, both on NUMA node 3.
TWO_ON_NODE3 = {3: ["0000:c1:00.0", "0000:c2:00.0"]}
OTHERS = {0: [pci("0000:03:00.0", 0x0300, 0x1a03, 0x2000)],
          2: [pci("0000:a0:00.0", 0x0680, 0x10de, 0x22a3)]}

FILES = {
    "2s2n8c_smt_8gpu.xml": machine(True, EIGHT, OTHERS),
    "2s2n8c_nosmt_8gpu.xml": machine(False, EIGHT, OTHERS),
    "2s2n8c_smt_2gpu_node3.xml": machine(True, TWO_ON_NODE3, OTHERS),
    "2s2n8c_smt_nogpu.xml": machine(True, {}, OTHERS),
    # Mixed models: the GPU at 0000:c2 is another model (device 0x26b9).
    "2s2n8c_smt_2gpu_node3_mixed.xml": machine(True, TWO_ON_NODE3, OTHERS,
                                               lambda busid: 0x26b9 if busid.startswith("0000:c2") else 0x2330),
}

if __name__ == "__main__":
    for name, text in FILES.items():
        with open(name, "w") as f:
            f.write(text)
    sys.exit(0)
