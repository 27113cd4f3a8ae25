"""The Kubernetes manifests of docs/kubernetes.md and the pods an operator
renders from them (docs/k8s/): reading both, and the operators' rendering
rules restated in a few lines each, so that a test can tell when the docs'
manifests and the pods that test_kube.py plays drift apart.

The rules (read in the operators' sources; docs/kubernetes.md says the same
in prose):
* Kubeflow Trainer v2 (TrainJob): JobSet `<trainjob>`, replicated job `node`
  (Indexed Job `<trainjob>-node-0`); pod hostname `<trainjob>-node-0-<i>`,
  subdomain `<trainjob>`, restartPolicy OnFailure unless the runtime names
  one; the torch plugin upserts the TrainJob's env, then PET_NNODES,
  PET_NPROC_PER_NODE, PET_NODE_RANK (the completion-index annotation),
  PET_MASTER_ADDR, PET_MASTER_PORT (29500) into the container `node`, and
  adds containerPort 29500; trainer.command/args/image replace the
  container's, resourcesPerNode becomes its resources.
* Training Operator v1 (PyTorchJob): pod `<job>-<type>-<i>` per replica, no
  hostname or subdomain; port pytorchjob-port 23456 by default; appended env
  PYTHONUNBUFFERED, MASTER_PORT, PET_MASTER_PORT, MASTER_ADDR,
  PET_MASTER_ADDR, WORLD_SIZE, RANK, PET_NODE_RANK, PET_NPROC_PER_NODE,
  PET_NNODES (non-elastic jobs with a Master)."""
import os
import re

import yaml

SOURCE = os.environ.get("CTRUN_SOURCE_DIR",
                        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DOC = os.path.join(SOURCE, "docs", "kubernetes.md")
PODS = {"TrainJob": os.path.join(SOURCE, "docs", "k8s", "trainjob-pods.yaml"),
        "PyTorchJob": os.path.join(SOURCE, "docs", "k8s", "pytorchjob-pods.yaml")}

TRAINER_PORT = 29500          # Kubeflow Trainer's constants.ContainerTrainerPort
PYTORCHJOB_PORT = 23456       # Training Operator's PyTorchJobDefaultPort
PYTORCHJOB_PORT_NAME = "pytorchjob-port"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def doc_text():
    with open(DOC, encoding="utf-8") as f:
        return f.read()


def doc_manifests():
    """Every object of the ```yaml blocks of docs/kubernetes.md, by kind
    (one object per kind: the doc shows one of each)."""
    out = {}
    for block in re.findall(r"```yaml\n(.*?)```", doc_text(), re.S):
        for obj in yaml.safe_load_all(block):
            if obj:
                out[obj["kind"]] = obj
    return out


def rendered(kind):
    """The pods docs/k8s/ holds for `kind` (TrainJob or PyTorchJob)."""
    with open(PODS[kind], encoding="utf-8") as f:
        return [p for p in yaml.safe_load_all(f) if p]


def upsert(env, items):
    """Kubeflow's apply.UpsertEnvVars: replaces a variable of the same name in
    place, else appends."""
    env = [dict(e) for e in env]
    for item in items:
        for i, e in enumerate(env):
            if e["name"] == item["name"]:
                env[i] = dict(item)
                break
        else:
            env.append(dict(item))
    return env


def value(name, v):
    return {"name": name, "value": str(v)}


def cpu_count(resources):
    """The torch plugin's CPU count for numProcPerNode auto without GPUs:
    requests.cpu, else limits.cpu, at least 1."""
    for part in ("requests", "limits"):
        cpu = (resources or {}).get(part, {}).get("cpu")
        if cpu is not None:
            cpu = str(cpu)
            return max(1, int(cpu[:-1]) // 1000 if cpu.endswith("m") else int(float(cpu)))
    return 1


def render_trainjob(runtime, job):
    """The pods Kubeflow Trainer renders for TrainJob `job` on ClusterTrainingRuntime `runtime`."""
    name, trainer = job["metadata"]["name"], job["spec"].get("trainer", {})
    rjob = next(r for r in runtime["spec"]["template"]["spec"]["replicatedJobs"] if r["name"] == "node")
    ancestor = rjob["template"]["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"]
    assert ancestor == "trainer", "the torch plugin looks for the ancestor step `trainer`"
    spec = rjob["template"]["spec"]["template"]["spec"]
    (base,) = [c for c in spec["containers"] if c["name"] == "node"]
    nodes = trainer.get("numNodes", runtime["spec"]["mlPolicy"].get("numNodes", 1))
    resources = trainer.get("resourcesPerNode", base.get("resources"))
    nproc = trainer.get("numProcPerNode")
    if nproc is None:
        gpus = any("gpu" in k.lower() for part in (resources or {}).values() for k in part)
        nproc = "auto" if gpus else cpu_count(resources)
    pods = []
    for i in range(nodes):
        c = {"name": "node", "image": trainer.get("image", base["image"]),
             "command": trainer.get("command", base.get("command")),
             "args": trainer.get("args", base.get("args")),
             "env": upsert(upsert(base.get("env", []), trainer.get("env", [])), [
                 value("PET_NNODES", nodes), value("PET_NPROC_PER_NODE", nproc),
                 {"name": "PET_NODE_RANK",
                  "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}},
                 value("PET_MASTER_ADDR", f"{name}-node-0-0.{name}"), value("PET_MASTER_PORT", TRAINER_PORT)]),
             "ports": [{"containerPort": TRAINER_PORT}], "resources": resources}
        pods.append({"hostname": f"{name}-node-0-{i}", "subdomain": name,
                     "restartPolicy": spec.get("restartPolicy", "OnFailure"),
                     "completionIndex": str(i), "containers": [c]})
    return pods


def render_pytorchjob(job):
    """The pods the Training Operator (v1) renders for a non-elastic PyTorchJob `job` with a Master."""
    name, spec = job["metadata"]["name"], job["spec"]
    assert "elasticPolicy" not in spec, "only the static (Master + Worker) form is rendered here"
    replicas = spec["pytorchReplicaSpecs"]
    nproc = str(spec.get("nprocPerNode", "auto"))
    total = sum(r.get("replicas", 1) for r in replicas.values())
    world = total * (int(nproc) if nproc.isdigit() else 1)

    def port(rtype):
        (c,) = [c for c in replicas[rtype]["template"]["spec"]["containers"] if c["name"] == "pytorch"]
        named = [p for p in c.get("ports", []) if p.get("name") == PYTORCHJOB_PORT_NAME]
        return named[0]["containerPort"] if named else PYTORCHJOB_PORT

    master = f"{name}-master-0"
    pods = []
    for rtype in ("Master", "Worker"):
        for i in range(replicas.get(rtype, {}).get("replicas", 1) if rtype in replicas else 0):
            rank = i + (1 if rtype == "Worker" else 0)
            spec_ = replicas[rtype]["template"]["spec"]
            (base,) = [c for c in spec_["containers"] if c["name"] == "pytorch"]
            ports = list(base.get("ports", []))
            if not any(p.get("name") == PYTORCHJOB_PORT_NAME for p in ports):
                ports.append({"name": PYTORCHJOB_PORT_NAME, "containerPort": PYTORCHJOB_PORT})
            env = list(base.get("env", [])) + [
                value("PYTHONUNBUFFERED", 1),
                value("MASTER_PORT", port("Master")), value("PET_MASTER_PORT", port("Master")),
                value("MASTER_ADDR", master), value("PET_MASTER_ADDR", master),
                value("WORLD_SIZE", world), value("RANK", rank), value("PET_NODE_RANK", rank),
                value("PET_NPROC_PER_NODE", nproc), value("PET_NNODES", total)]
            c = {"name": "pytorch", "image": base["image"], "command": base.get("command"),
                 "args": base.get("args"), "env": env, "ports": ports, "resources": base.get("resources")}
            pods.append({"name": f"{name}-{rtype.lower()}-{i}",
                         "restartPolicy": replicas[rtype].get("restartPolicy", "OnFailure"),
                         "containers": [c]})
    return pods


def shape(pod, kind):
    """What of a rendered pod file the rules above decide, in their form."""
    spec, meta = pod["spec"], pod["metadata"]
    out = {"restartPolicy": spec.get("restartPolicy"), "containers": []}
    if kind == "TrainJob":
        out.update(hostname=spec.get("hostname"), subdomain=spec.get("subdomain"),
                   completionIndex=meta.get("annotations", {}).get(COMPLETION_INDEX))
    else:
        out["name"] = meta["name"]
    for c in spec["containers"]:
        out["containers"].append({k: c.get(k) for k in ("name", "image", "command", "args", "env", "ports",
                                                        "resources")})
    return out


def expected(kind):
    m = doc_manifests()
    if kind == "TrainJob":
        return render_trainjob(m["ClusterTrainingRuntime"], m["TrainJob"])
    return render_pytorchjob(m["PyTorchJob"])
