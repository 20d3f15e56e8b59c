"""The kinds carbonshift handles: one module per kind, one registry of them.

Each kind is a :class:`~webhook.kinds.base.Kind` in its own module
(:mod:`~webhook.kinds.policies`, :mod:`~webhook.kinds.nodepools`,
:mod:`~webhook.kinds.offloadings`): its group/version/kind and resource, its admission
decider, its scope and opt-in rule, how the leader follows it, the Events and the gauge
it feeds, and the RBAC it needs. :data:`REGISTRY` lists them; admission dispatches on it,
the re-evaluation (:mod:`webhook.kinds.reevaluation`) follows the kinds it says are
followed, ``carbonshift mutate`` builds reviews from it, and tests check
``manifests/base/webhook.yaml`` (:meth:`Registry.webhook_rules`) and the ClusterRole in
``manifests/base/rbac.yaml`` (:meth:`Registry.grants`) against it, and with them the
chart, which renders the same objects.

Adding a kind: one module here with its :class:`Kind` and a row in :data:`REGISTRY`, the
rules and grants it asks for in ``manifests/base/`` (the tests say which), and tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from webhook.kinds.base import Context, Decider, Following, Grant, Kind, Tally
from webhook.kinds.nodepools import NODEPOOL
from webhook.kinds.offloadings import NAMESPACE_OFFLOADING
from webhook.kinds.policies import CLUSTER_PROPAGATION_POLICY, PROPAGATION_POLICY

__all__ = [
    "KARMADA",
    "KARPENTER",
    "KINDS",
    "LIQO",
    "REGISTRY",
    "Context",
    "Decider",
    "Following",
    "Grant",
    "Kind",
    "Registry",
    "Tally",
    "find",
]

KARMADA = PROPAGATION_POLICY.group
KARPENTER = NODEPOOL.group
LIQO = NAMESPACE_OFFLOADING.group

WebhookRule = tuple[str, str, str, str]
"""``(apiGroup, apiVersion, resource, scope)`` of one webhook registration rule."""


class Registry:
    """The handled kinds, looked up by group and kind."""

    def __init__(self, rows: Iterable[Kind]) -> None:
        self.rows = tuple(rows)
        self._by_name: Mapping[tuple[str, str], Kind] = {(k.group, k.kind): k for k in self.rows}
        if len(self._by_name) != len(self.rows):
            raise ValueError("a kind is registered twice")

    def __iter__(self) -> Iterator[Kind]:
        return iter(self.rows)

    def find(self, group: str, kind: str) -> Kind | None:
        """The row for ``group``/``kind`` (any version: the API server may convert)."""
        return self._by_name.get((group, kind))

    def followed(self) -> tuple[Kind, ...]:
        """The kinds the leader follows after creation."""
        return tuple(k for k in self.rows if k.following is not None)

    def webhook_rules(self) -> list[WebhookRule]:
        """The mutating webhook registration's rules, one per kind, sorted."""
        return sorted(
            (k.group, k.version, k.resource, "Namespaced" if k.namespaced else "Cluster")
            for k in self.rows
        )

    def grants(self) -> set[tuple[str, str, str]]:
        """Every ``(apiGroup, resource, verb)`` the kinds need, each once."""
        return {
            (g.group, resource, verb)
            for k in self.rows
            for g in k.grants
            for resource in g.resources
            for verb in g.verbs
        }

    def with_(self, *rows: Kind) -> Registry:
        """This registry and ``rows`` besides (a test's own kind)."""
        return Registry((*self.rows, *rows))


REGISTRY = Registry(
    (PROPAGATION_POLICY, CLUSTER_PROPAGATION_POLICY, NODEPOOL, NAMESPACE_OFFLOADING)
)
"""Every kind carbonshift handles."""
KINDS: tuple[Kind, ...] = REGISTRY.rows


def find(group: str, kind: str) -> Kind | None:
    """The registered row for ``group``/``kind`` (any version), or None."""
    return REGISTRY.find(group, kind)
