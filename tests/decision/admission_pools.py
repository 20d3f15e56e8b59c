"""One NodePool through admission: as the user wrote it (:func:`nodepool`), the
local grid at one intensity (:func:`inputs`) and what admission stores (:func:`store`)."""

from __future__ import annotations

from typing import Any

from tests.decision.nodepools import apply
from tests.support import reading
from webhook.decision.karpenter.nodepool import NodePoolInputs, decide
from webhook.model.config import NodePoolConfig
from webhook.model.intensity import Reading


def nodepool(strategy: str | None = None, **spec: Any) -> dict[str, Any]:
    annotations = {"carbonshift.io/strategy": strategy} if strategy else {}
    template_spec = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": spec.pop("requirements", []),
    }
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default", "annotations": annotations},
        "spec": {"template": {"spec": template_spec}, **spec},
    }


def store(obj: dict[str, Any], inputs: NodePoolInputs) -> dict[str, Any]:
    return apply(obj, decide(obj, inputs))


def inputs(value: float, **settings: Any) -> NodePoolInputs:
    table: dict[str, Reading] = {"DE": reading("DE", value), "FR": reading("FR", 60.0)}
    return NodePoolInputs("DE", table, NodePoolConfig(**settings))
