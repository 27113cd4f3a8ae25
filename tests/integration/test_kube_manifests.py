"""The Kubernetes manifests of docs/kubernetes.md and the pods test_kube.py
plays (docs/k8s/) cannot drift apart: the pods the operators would render
from the docs' TrainJob (+ ClusterTrainingRuntime) and PyTorchJob, by their
rules (kube_pods.py), equal the pod files field by field: image, command,
args, every env variable (name, value, or the field it is taken from),
ports, resources, hostname, subdomain, restart policy. The doc's prose
values (`PET_NNODES=2` ...) agree with the pods too. No podman, no cluster:
a fast check of the docs."""
import re
import unittest

import kube_pods as k


class ManifestsTest(unittest.TestCase):
    def check(self, kind):
        want = k.expected(kind)
        have = [k.shape(p, kind) for p in k.rendered(kind)]
        self.assertEqual(len(have), len(want), f"{k.PODS[kind]}: pod count")
        for i, (h, w) in enumerate(zip(have, want)):
            with self.subTest(pod=i):
                self.assertEqual(h, w, f"{k.PODS[kind]}: pod {i} differs from what the operator renders from "
                                       f"the {kind} in docs/kubernetes.md")
        return have

    def test_trainjob_pods_follow_from_the_docs_manifests(self):
        pods = self.check("TrainJob")
        names = [p["metadata"]["name"] for p in k.rendered("TrainJob")]
        for pod, name in zip(pods, names):
            self.assertTrue(name.startswith(pod["hostname"] + "-"), f"{name}: a Job's pod is <hostname>-<random>")

    def test_pytorchjob_pods_follow_from_the_docs_manifests(self):
        self.check("PyTorchJob")

    def test_every_pod_runs_the_same_image_and_ctrun(self):
        images = set()
        for kind in k.PODS:
            for pod in k.rendered(kind):
                for c in pod["spec"]["containers"]:
                    images.add(c["image"])
                    self.assertEqual(c["command"][0], "ctrun", f"{kind}: ctrun is the container's command")
        self.assertEqual(len(images), 1, images)

    def test_the_docs_prose_states_the_trainjob_pods_env(self):
        """'Each of the two pods runs ctrun with PET_NNODES=2, ...' after the
        TrainJob manifest names the values the pods get (a|b: per pod)."""
        text = k.doc_text()
        para = re.search(r"Each of the \w+ pods runs `ctrun` with(.*?)\n\n", text, re.S)
        self.assertIsNotNone(para, "docs/kubernetes.md: the paragraph after the TrainJob manifest")
        stated = dict(re.findall(r"`(PET_[A-Z_]+)=([^`]+)`", para.group(1)))
        self.assertGreaterEqual(len(stated), 5, stated)
        pods = k.rendered("TrainJob")
        for name, val in stated.items():
            per_pod = val.split("|")
            for i, pod in enumerate(pods):
                (env,) = [e for e in pod["spec"]["containers"][0]["env"] if e["name"] == name]
                got = env.get("value")
                if got is None:  # PET_NODE_RANK: the completion index annotation
                    got = pod["metadata"]["annotations"][k.COMPLETION_INDEX]
                self.assertEqual(got, per_pod[i if len(per_pod) > 1 else 0], f"{name} of pod {i}")


if __name__ == "__main__":
    unittest.main()
