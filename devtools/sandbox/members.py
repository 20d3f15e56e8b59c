"""Joining the member clusters to Karmada in Push mode, as ``karmadactl join`` does.

In the member: namespace ``karmada-cluster``, a ServiceAccount ``karmada-<member>`` bound
to a ClusterRole that may do anything, and a token for it (TokenRequest). On the Karmada
API server: a Secret ``karmada-cluster/<member>`` with that ``token`` and the member's
``caBundle``, and the Cluster (``syncMode: Push``, ``apiEndpoint``, ``secretRef``).
karmada-controller-manager then dials the member: it writes the Cluster's status (Ready,
API enablements, resource summary) and applies Works into it.

Each member also gets one Node that KWOK simulates (no kubelet): Karmada's resource
summary has capacity to divide Aggregated and dynamic-weight policies by, and the Pods of
the Deployments Karmada applies are scheduled there and Running.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import yaml

from devtools.sandbox.objects import (
    JOIN_NAMESPACE,
    SIMULATED_NODE,
    cluster_secret,
    demo_cluster,
    join_account,
    member_join_objects,
    simulated_node,
    simulated_node_capacity,
)

CREDENTIAL_LIFETIME = "8760h"
"""How long the member's token is valid: a sandbox is thrown away long before."""

CLUSTERS = "cluster.cluster.karmada.io"


class Kubectl(Protocol):
    """Runs kubectl against the sandbox's kubeconfig and returns its stdout."""

    def __call__(self, *args: str, stdin: str | None = None) -> str: ...


def join(
    kubectl: Kubectl, member: str, spec: Mapping[str, Any], endpoint: str, ca_bundle: str
) -> None:
    """Give Karmada a credential for ``member`` and register it as a Push-mode Cluster."""
    context = f"--context={member}"
    manifests = yaml.safe_dump_all(member_join_objects(member), sort_keys=False)
    kubectl(context, "apply", "-f", "-", stdin=manifests)
    token = kubectl(
        context, "-n", JOIN_NAMESPACE, "create", "token", join_account(member),
        f"--duration={CREDENTIAL_LIFETIME}",
    ).strip()  # fmt: skip
    karmada = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": JOIN_NAMESPACE}},
        cluster_secret(member, token, ca_bundle),
        demo_cluster(member, spec, endpoint),
    ]
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(karmada, sort_keys=False))


def add_node(kubectl: Kubectl, member: str) -> None:
    """Give the member one Node that KWOK simulates (see
    :func:`~devtools.sandbox.objects.simulated_node`)."""
    context = f"--context={member}"
    kubectl(context, "apply", "-f", "-", stdin=json.dumps(simulated_node()))
    kubectl(
        context, "patch", "node", SIMULATED_NODE, "--subresource=status", "--type=merge",
        "-p", json.dumps(simulated_node_capacity(member)),
    )  # fmt: skip


def wait_ready(kubectl: Kubectl, members: Sequence[str], timeout: float) -> None:
    """Until karmada-controller-manager has found every member Ready."""
    names = [f"{CLUSTERS}/{m}" for m in members]
    kubectl("wait", "--for=condition=Ready", f"--timeout={timeout:g}s", *names)
