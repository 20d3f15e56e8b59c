"""Karpenter: NodePools paused, resumed and steered to greener instances by carbon, with
carbon prices on NodeOverlays (kept by the leader's re-evaluation), accounted by the vCPUs
of the Nodes they launched."""

from __future__ import annotations

from webhook.controllers.accounting_karpenter import Nodes
from webhook.integrations.base import Integration
from webhook.kinds.nodepools import NODEPOOL

ROW = Integration("karpenter", kinds=(NODEPOOL,), accounting=(Nodes((NODEPOOL,)),))
