"""The technologies carbonshift works with, one row each (:class:`Integration`): Karmada,
Karpenter, Liqo, Open Cluster Management, Kueue, and what they share (``carbonshift``:
the re-evaluation, the accounting, the Events).

A row carries its handled kinds, the leader's controllers it runs (each switched by its
config section), the ClusterRole rules it needs besides its kinds' own, its accounting
hooks (how the leader accounts its kinds' emissions) and the Event reasons it records
about objects that are no handled kind. The application manager (:mod:`webhook.app`)
starts :func:`controllers` (the accountant runs :func:`accounts`); ``make generate``
(:mod:`devtools.manifests`) writes :func:`cluster_role`; the report and
``carbonshift explain`` read :data:`EVENT_REASONS`. Adding a technology: one module here
with its row, listed in :data:`INTEGRATIONS`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import structlog

from webhook import kinds
from webhook.integrations import core, karmada, karpenter, kueue, liqo, ocm
from webhook.integrations.base import Fleet, Integration, Run, Wiring

if TYPE_CHECKING:
    from webhook.controllers.accounting import Accounts
    from webhook.controllers.runner import KeyedController

__all__ = [
    "EVENTS",
    "EVENT_REASONS",
    "INTEGRATIONS",
    "Fleet",
    "Integration",
    "Run",
    "Wiring",
    "accounted",
    "accounts",
    "cluster_role",
    "controllers",
    "grants",
]

log = structlog.get_logger("carbonshift.app")

INTEGRATIONS: tuple[Integration, ...] = (
    karmada.ROW,
    karpenter.ROW,
    liqo.ROW,
    ocm.ROW,
    kueue.ROW,
    core.ROW,
)
"""Every integration, in the order their controllers start and their rules are written."""

EVENTS: dict[str, str] = {r: on for row in INTEGRATIONS for r, on in row.events.items()}
"""Event reasons recorded about no handled kind -> what they are recorded about."""
EVENT_REASONS = kinds.REGISTRY.events() | frozenset(EVENTS)
"""Every Event reason carbonshift records: the handled kinds' and the integrations'."""


def grants() -> tuple[kinds.Grant, ...]:
    """The ClusterRole rules the integrations need besides their kinds' own."""
    return tuple(g for row in INTEGRATIONS for g in row.grants)


def cluster_role(registry: kinds.Registry = kinds.REGISTRY) -> list[kinds.Rule]:
    """The ClusterRole's rules: ``registry``'s kinds' grants, then the integrations'."""
    return registry.cluster_role(grants())


def accounts() -> tuple[Accounts, ...]:
    """Every row's accounting hooks, in row order (the order the accountant runs them)."""
    return tuple(hook for row in INTEGRATIONS for hook in row.accounting)


def accounted() -> tuple[kinds.Kind, ...]:
    """The kinds whose managed objects the leader accounts (a hook of their row names them)."""
    return tuple(kind for hook in accounts() for kind in hook.kinds)


def controllers(wiring: Wiring) -> list[KeyedController[Any]]:
    """The leader's controllers the configuration switches on, row by row, in start order
    (built with the rows' accounting hooks, :func:`accounts`); a section switched off is
    logged once (``<section>_disabled``)."""
    keepers = tuple(keep for row in INTEGRATIONS for keep in row.keepers)
    wiring = dataclasses.replace(wiring, accounts=accounts(), keepers=keepers)
    config = wiring.config
    out: list[KeyedController[Any]] = []
    sections: dict[str, None] = {}
    for row in INTEGRATIONS:
        for run in row.runs:
            sections[run.section] = None
            if getattr(config, run.section).enabled:
                out.extend(run.make(wiring))
    for section in sections:
        if not getattr(config, section).enabled:
            log.info(f"{section}_disabled", hint=f"{section}.enabled is false")
    return out
