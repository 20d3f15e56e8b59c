"""What reads the kind registry instead of a list of its own: the report's Event reasons,
the accounting, the CRD fuzzer's values and docs/annotations.md's table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devtools.sandbox.layout import SandboxError
from tests.semantics import fleet
from tests.serve import crd_values
from webhook import integrations, kinds
from webhook.cli import preview
from webhook.integrations import EVENT_REASONS as REASONS
from webhook.integrations import EVENTS

ANNOTATIONS = Path(__file__).resolve().parents[2] / "docs" / "annotations.md"


def _table() -> list[tuple[str, str, str]]:
    """The first table of docs/annotations.md: ``(key, on, meaning)`` per row."""
    lines = ANNOTATIONS.read_text().split("\n\n", 2)[2].splitlines()
    rows = []
    for line in lines[2:]:  # after the header and its rule
        if not line.startswith("|"):
            break
        key, on, meaning = (c.strip() for c in line.strip("|").split(" | ", 2))
        rows.append((key, on, meaning))
    return rows


def test_the_report_knows_every_event_reason_a_kind_or_the_fleet_records() -> None:
    expected = {r for k in kinds.KINDS for r in k.events} | set(EVENTS)
    assert expected == REASONS


def test_every_kind_is_accounted_one_way() -> None:
    ways = [hook.kinds for hook in integrations.accounts()]
    assert sorted(k.kind for way in ways for k in way) == sorted(k.kind for k in kinds.KINDS)


def test_every_kind_and_every_event_reason_is_in_the_annotations_table() -> None:
    rows = _table()
    on = " ".join(where for _, where, _ in rows)
    for row in kinds.KINDS:
        assert re.search(rf"\b{row.kind}\b", on), f"docs/annotations.md: no row on {row.kind}"
    events = {
        m[1]: {w.strip() for w in where.removeprefix("written,").split(",")}
        for key, where, _ in rows
        if (m := re.fullmatch(r"Event `(\w+)`", key))
    }
    assert set(events) == REASONS, "docs/annotations.md: one row per Event reason"
    for reason, where in events.items():
        recorded_on = {k.kind for k in kinds.KINDS if reason in k.events}
        if reason in EVENTS:
            recorded_on.add(EVENTS[reason])
        assert where == recorded_on, reason


def test_the_crd_fuzzer_draws_every_kind() -> None:
    assert set(crd_values.KINDS) == {k.kind for k in kinds.KINDS}
    for row in kinds.KINDS:
        group, version, resource, namespace = crd_values.KINDS[row.kind]
        assert (group, version, resource, bool(namespace)) == (
            row.group,
            row.version,
            row.resource,
            row.namespaced,
        )


@pytest.mark.parametrize("kind", sorted(crd_values.KINDS))
def test_objects_drawn_from_each_crd_are_previewed_without_a_crash(kind: str) -> None:
    try:
        schema = crd_values.crd_schema(kind)
    except SandboxError as exc:
        pytest.skip(str(exc))
    ctx = fleet.context()
    namespaces = {"shop": {"carbonshift.io/enabled": "true"}}

    @settings(crd_values.FUZZ, max_examples=25)
    @given(obj=crd_values.from_schema(schema), refresh=st.booleans())
    def one(obj: dict[str, object], refresh: bool) -> None:
        _, _, _, namespace = crd_values.KINDS[kind]
        if namespace:
            obj["metadata"] = {**obj["metadata"], "namespace": namespace}  # type: ignore[dict-item]
        (answered,) = preview.preview([obj], ctx, namespaces)
        outcome = answered.outcome
        assert outcome.result in {"patched", "unchanged", "skipped", "ignored", "invalid"}, (
            outcome.result,
            outcome.reason,
        )

    one()
