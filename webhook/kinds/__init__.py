"""The kinds carbonshift handles: one module per kind, one registry of them.

Each kind is a :class:`~webhook.kinds.base.Kind` in its own module
(:mod:`~webhook.kinds.policies`, :mod:`~webhook.kinds.nodepools`,
:mod:`~webhook.kinds.offloadings`): its group/version/kind and resource, its admission
decider, its scope and opt-in rule, how the leader follows it, the Events and the gauge
it feeds, and the RBAC it needs. :data:`REGISTRY` lists them; admission dispatches on it,
the re-evaluation (:mod:`webhook.kinds.reevaluation`) follows the kinds it says are
followed, ``carbonshift mutate`` builds reviews from it, the report iterates it, and
``make generate`` (:mod:`devtools.manifests`) writes the webhook registration's ``rules:``
(:meth:`Registry.webhook_rules`) and the ClusterRole's rules (:meth:`Registry.cluster_role`:
the kinds' grants and the integrations', :func:`webhook.integrations.cluster_role`) into
``manifests/base/`` and the chart's templates. Each kind belongs to one integration
(:mod:`webhook.integrations`), whose row also says how the leader accounts it (its
accounting hooks).

Adding a kind: one module here with its :class:`Kind` and a row in :data:`REGISTRY`,
``make generate``, and tests.
"""

from __future__ import annotations

import dataclasses
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
    "Rule",
    "Tally",
    "find",
]

KARMADA = PROPAGATION_POLICY.group
KARPENTER = NODEPOOL.group
LIQO = NAMESPACE_OFFLOADING.group

WebhookRule = tuple[str, str, str, str]
"""``(apiGroup, apiVersion, resource, scope)`` of one webhook registration rule."""
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")
"""The order a rule's verbs are written in (any other verb after them, sorted)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Rule:
    """One ClusterRole rule: the grants on one group's resources merged, with every reason."""

    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    whys: tuple[str, ...]
    """``who: why`` of each grant merged into it (who: the kinds, or none for the fleet)."""


def _verb_order(verb: str) -> tuple[int, str]:
    return (VERBS.index(verb), "") if verb in VERBS else (len(VERBS), verb)


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

    def cluster_role(self, fleet: Iterable[Grant]) -> list[Rule]:
        """The ClusterRole's rules: every kind's grants (in registry order), then
        ``fleet``'s (the integrations', :func:`webhook.integrations.grants`); grants on the
        same group and resources merged into one rule (the union of their verbs, each
        reason kept, a kind's reason once however many kinds share it)."""
        asked: list[tuple[str, Grant]] = []
        for k in self.rows:
            asked.extend((k.kind, g) for g in k.grants)
        asked.extend(("", g) for g in fleet)
        merged: dict[tuple[str, tuple[str, ...]], tuple[set[str], dict[str, list[str]]]] = {}
        for who, g in asked:
            verbs, whys = merged.setdefault((g.group, g.resources), (set(), {}))
            verbs.update(g.verbs)
            kinds = whys.setdefault(g.why, [])
            if who and who not in kinds:
                kinds.append(who)
        return [
            Rule(
                group,
                resources,
                tuple(sorted(verbs, key=_verb_order)),
                tuple(f"{', '.join(who)}: {why}" if who else why for why, who in whys.items()),
            )
            for (group, resources), (verbs, whys) in merged.items()
        ]

    def events(self) -> frozenset[str]:
        """Every Event reason recorded about a handled kind."""
        return frozenset(reason for k in self.rows for reason in k.events)

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
