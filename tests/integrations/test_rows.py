"""The integrations' rows: each handled kind belongs to exactly one technology, each row's
controllers are switched by a real config section, the controllers the manager starts
follow the configuration, and every grant and Event reason comes from one row."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from webhook import integrations, kinds
from webhook.integrations import INTEGRATIONS, Integration, Run, Wiring
from webhook.model.config import Config, parse


def test_every_handled_kind_belongs_to_exactly_one_integration() -> None:
    owned = [k for row in INTEGRATIONS for k in row.kinds]
    assert sorted(k.kind for k in owned) == sorted(k.kind for k in kinds.REGISTRY)
    assert [row.name for row in INTEGRATIONS] == [
        "karmada", "karpenter", "liqo", "ocm", "kueue", "carbonshift",
    ]  # fmt: skip


def test_every_run_is_switched_by_a_config_section() -> None:
    config = Config()
    for row in INTEGRATIONS:
        for run in row.runs:
            assert isinstance(getattr(config, run.section).enabled, bool), (row.name, run)


def test_grants_and_event_reasons_are_each_declared_once() -> None:
    grants = integrations.grants()
    assert len({(g.group, g.resources) for g in grants}) == len(grants)
    declared = [r for row in INTEGRATIONS for r in row.events]
    assert len(declared) == len(set(declared))
    assert kinds.REGISTRY.events() | set(declared) == integrations.EVENT_REASONS


def test_the_manager_starts_what_the_configuration_switches_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[str] = []

    def run(section: str) -> Run:
        def make(_wiring: Wiring) -> list[Any]:
            made.append(section)
            return [section]

        return Run(section, make)

    rows = (
        Integration("a", runs=(run("labels"), run("carry"))),
        Integration("b", runs=(run("ocm"),)),
    )
    monkeypatch.setattr(integrations, "INTEGRATIONS", rows)
    config = parse({"labels": {"enabled": False}, "ocm": {"enabled": True}})
    wiring = Wiring(config, cast(Any, None), cast(Any, None), cast(Any, None))
    started: list[Any] = integrations.controllers(wiring)
    assert started == ["carry", "ocm"]  # in row order
    assert made == ["carry", "ocm"]  # a section switched off builds nothing


def test_with_every_section_off_the_leader_runs_no_controller() -> None:
    off = {s: {"enabled": False} for s in ("labels", "carry", "reevaluate", "accounting",
                                            "ocm", "kueue")}  # fmt: skip
    wiring = Wiring(parse(off), cast(Any, None), cast(Any, None), cast(Any, None))
    assert integrations.controllers(wiring) == []


def test_the_manager_hands_the_rows_accounting_hooks_to_the_controllers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handed: list[tuple[Any, ...]] = []

    def make(wiring: Wiring) -> list[Any]:
        handed.append(wiring.accounts)
        return []

    hooks = [cast(Any, object()) for _ in range(3)]
    rows = (
        Integration("a", accounting=(hooks[0], hooks[1])),
        Integration("b", runs=(Run("accounting", make),)),
        Integration("c", accounting=(hooks[2],)),
    )
    monkeypatch.setattr(integrations, "INTEGRATIONS", rows)
    wiring = Wiring(Config(), cast(Any, None), cast(Any, None), cast(Any, None))
    integrations.controllers(wiring)
    assert handed == [tuple(hooks)]  # every row's, in row order


async def test_karmadas_carrier_and_rebalancer_share_one_cache_per_binding_kind() -> None:
    from kubernetes_asyncio import client  # noqa: PLC0415

    from tests import kubeapi  # noqa: PLC0415
    from webhook.controllers.karmada.carrier import Carrier  # noqa: PLC0415
    from webhook.controllers.karmada.rebalancer import Rebalancing  # noqa: PLC0415
    from webhook.integrations.base import Fleet  # noqa: PLC0415

    off = {s: {"enabled": False} for s in ("labels", "accounting", "ocm", "kueue")}
    config = parse(off)
    world = SimpleNamespace(context=None, feed=SimpleNamespace(outlook=None, spread=None))
    inventory = SimpleNamespace(rooms=0)
    async with client.ApiClient() as api:
        fleet = Fleet(api, cast(Any, kubeapi.Gate()), cast(Any, None), cast(Any, inventory),
                      cast(Any, None))  # fmt: skip
        wiring = Wiring(config, cast(Any, world), fleet, cast(Any, None))
        started = integrations.controllers(wiring)
    [carrier] = [c for c in started if isinstance(c, Carrier)]
    [keeper] = [c for c in started if isinstance(c, Rebalancing)]
    assert keeper.rebalancer is not None
    assert keeper.rebalancer.watched is not None
    assert carrier.bindings is keeper.rebalancer.watched.bindings
    follower_caches = {id(c) for c in keeper.follower.caches}
    assert all(id(c) in follower_caches for c in carrier.bindings)  # started once, shared
