"""A local control plane to try carbonshift with ``kubectl apply`` (a development tool).

``python -m devtools.sandbox up`` starts, on 127.0.0.1 only:

* the Karmada API server: etcd, kube-apiserver and kube-controller-manager (built from Go
  modules by ``hack/build-binaries.sh``), with a freshly generated PKI and an admin client
  certificate (``O=system:masters``), and the Karmada and Karpenter CRDs of the pinned Go
  modules (``hack/crds.sh``, into the binary cache);
* three member clusters in grids of clearly different carbon intensity, each its own
  etcd, kube-apiserver, kube-controller-manager and kube-scheduler with one Node that KWOK
  simulates (Deployments get ReplicaSets and Running pods), joined to Karmada in Push
  mode as ``karmadactl join`` does (:mod:`~devtools.sandbox.members`);
* karmada-controller-manager (member status, Works applied into the members),
  karmada-scheduler with the carbonshift plugin, and carbonshift and karmada-webhook, both
  registered as admission webhooks.

It writes ``.sandbox/kubeconfig`` (contexts ``karmada``, the current one, and one per
member) and prints the lines to paste. ``down`` stops every process it started (pid files
under the state folder) and removes the state; ``status`` tells what runs.

The same :class:`Sandbox` class is the control-plane fixture of the end-to-end tests.

Modules by job: :mod:`~devtools.sandbox.layout` (paths, ports), :mod:`~devtools.sandbox.pki`
(certificates via :mod:`webhook.serve.certs`, kubeconfig), :mod:`~devtools.sandbox.processes`
(start, wait, stop), :mod:`~devtools.sandbox.components` (command lines),
:mod:`~devtools.sandbox.objects` (what gets applied), :mod:`~devtools.sandbox.members`
(joining the members), :mod:`~devtools.sandbox.control_plane`
(the :class:`Sandbox`), :mod:`~devtools.sandbox.cli`.
"""

from devtools.sandbox.control_plane import Sandbox
from devtools.sandbox.layout import LOOPBACK, Layout, SandboxError, free_port
from devtools.sandbox.pki import KeyPair, serving_pair
from devtools.sandbox.processes import Component

__all__ = [
    "LOOPBACK",
    "Component",
    "KeyPair",
    "Layout",
    "Sandbox",
    "SandboxError",
    "free_port",
    "serving_pair",
]
