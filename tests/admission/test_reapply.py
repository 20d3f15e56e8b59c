"""A user's own file applied again: the UPDATE an applier sends after carbonshift mutated.

For every corpus object with every annotation variant (:mod:`tests.semantics.fleet`), the
object is admitted as created and stored; then the user's unchanged file is applied
again the ways appliers do it, and the webhook's answer to that UPDATE must store the
very object already stored (a no-op: no new resourceVersion, no diff):

- client-side apply (``kubectl apply``, Argo CD by default): a JSON merge patch of the
  file over the live object (custom resources have no strategic merge; with the file
  unchanged the 3-way patch removes nothing), so a field carbonshift replaced reappears
  beside what it wrote;
- server-side apply (Flux, Argo CD ``ServerSideApply=true``) whose field manager came to
  own what the webhook added under its name: the file's fields re-asserted, and the
  fields carbonshift added and its decision annotation removed.

An edit of an unrelated field goes through as it is; a user's own change of the placement
in the file is decided again, so carbonshift keeps managing it; a field carbonshift wrote
that the user sets to a value of their own is theirs. The end-to-end proof against the
real API server and Karmada's validating webhook is tests/e2e/test_gitops_reapply.py.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import orjson
import pytest

from tests.semantics import fleet
from tests.support import NOW, reading
from webhook import kinds, testing
from webhook.decision import reapply
from webhook.decision.karmada import api
from webhook.decision.reason import line
from webhook.decision.record import Record
from webhook.kinds import Context
from webhook.model import config
from webhook.model.vocabulary import DECISION, REASON
from webhook.serve import admission
from webhook.serve.reviews import parse

CASES = list(fleet.cases())


APIS = {"karmada-1.16": api.resolve("1.16", None), "karmada-1.18": api.resolve("1.18", None)}
"""The two shapes of the ordered fill: failover groups, and overflow tiers."""


def _ctx(release: str = "karmada-1.18") -> Context:
    return Context(
        config=fleet.CONFIG, table=fleet.table(), now=NOW, generation=1, karmada=APIS[release]
    )


def _admit(
    obj: Mapping[str, Any],
    operation: testing.Operation,
    old: Any = None,
    release: str = "karmada-1.18",
) -> bytes:
    body = orjson.dumps(testing.review(obj, operation=operation, old=old))
    return admission.respond(admission.admit(parse(body), _ctx(release)))


def merge(live: Any, file: Any) -> Any:
    """RFC 7386 JSON merge patch of ``file`` over ``live`` (what client-side apply of an
    unchanged file sends for a custom resource)."""
    if not isinstance(file, dict) or not isinstance(live, dict):
        return copy.deepcopy(file)
    out = copy.deepcopy(live)
    for key, value in file.items():
        out[key] = merge(out.get(key), value)
    return out


def _kept(obj: Mapping[str, Any], release: str = "karmada-1.18") -> dict[str, Any] | None:
    stored = dict(testing.stored(obj, _admit(obj, "CREATE", release=release)))
    annotations = stored.get("metadata", {}).get("annotations", {})
    return stored if Record.decode(annotations.get(DECISION)).own else None


def _fields(obj: Mapping[str, Any]) -> Mapping[str, tuple[str, ...]]:
    row = kinds.find(str(obj["apiVersion"]).rpartition("/")[0], str(obj["kind"]))
    assert row is not None
    assert row.following is not None
    return row.following.fields


def _server_side(stored: Mapping[str, Any], file: Mapping[str, Any]) -> dict[str, Any]:
    """The file re-asserted over ``stored`` by a manager that owns what carbonshift added:
    those fields and the decision annotation and its line removed."""
    out: dict[str, Any] = merge(stored, file)
    record = Record.decode(stored["metadata"]["annotations"][DECISION])
    for key in record.own:
        path = reapply.where(key, _fields(stored))
        if path is not None and record.orig.get(key) is None:
            node = out
            for step in path[:-1]:
                node = node.get(step) or {}
            node.pop(path[-1], None)
    out["metadata"]["annotations"].pop(DECISION)
    out["metadata"]["annotations"].pop(REASON)
    return out


def _managed() -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(case, Karmada release, the user's file, as stored) for every case carbonshift
    changed a field of (the others have nothing to re-assert), on either fill shape."""
    out = []
    for release in APIS:
        for case, _, _, obj in CASES:
            stored = _kept(obj, release)
            if stored is not None:
                out.append((f"{case}[{release}]", release, obj, stored))
    return out


MANAGED = _managed()


@pytest.mark.parametrize(
    ("case", "release", "file", "stored"), MANAGED, ids=[c for c, *_ in MANAGED]
)
def test_reapplying_the_unchanged_file_stores_the_same_object(
    case: str, release: str, file: dict[str, Any], stored: dict[str, Any]
) -> None:
    for how, sent in (
        ("client-side", merge(stored, file)),
        ("server-side", _server_side(stored, file)),
    ):
        again = testing.stored(sent, _admit(sent, "UPDATE", stored, release))
        assert again == stored, f"{case}: {how} re-apply stored {again} instead of {stored}"


def test_every_stored_record_carries_its_line_and_a_removed_line_comes_back() -> None:
    for case, release, _, stored in MANAGED[::7]:
        annotations = stored["metadata"]["annotations"]
        record = Record.decode(annotations[DECISION])
        assert annotations[REASON] == line(stored["kind"], record), case
        assert "\n" not in annotations[REASON]
        cut = copy.deepcopy(stored)
        cut["metadata"]["annotations"].pop(REASON)
        again = testing.stored(cut, _admit(cut, "UPDATE", stored, release))
        assert again == stored, f"{case}: the line was not put back"
        other = copy.deepcopy(stored)
        other["metadata"]["annotations"][REASON] = "a line of the user's"
        again = testing.stored(other, _admit(other, "UPDATE", stored, release))
        assert again == stored, f"{case}: carbonshift's line was not kept"


def test_every_handled_kind_and_shape_is_reapplied() -> None:
    """The corpus covers each followed kind and each placement shape carbonshift writes."""
    shapes: set[str] = set()
    for _, _, _, stored in MANAGED:
        placement = stored.get("spec", {}).get("placement", {})
        names = {t.get("affinityName") for t in placement.get("clusterAffinities", [])}
        if "carbonshift-greenest" in names:
            fill = any("overflowAffinities" in t for t in placement["clusterAffinities"])
            shapes.add("overflow-tiers" if fill else "failover-groups")
        if "carbonshift-fallback" in names:
            shapes.add("green-first-terms")
        if "staticWeightList" in str(placement.get("replicaScheduling")):
            shapes.add("weights")
        if stored["kind"] == "NodePool":
            shapes.add("nodepool")
    assert shapes >= {
        "overflow-tiers",
        "failover-groups",
        "green-first-terms",
        "weights",
        "nodepool",
    }, shapes
    assert len(MANAGED) > 1000, len(MANAGED)


def _policy() -> dict[str, Any]:
    return testing.propagation_policy(
        "web", namespace="shop", clusters=["member-de", "member-fr", "member-pl"]
    )


def test_an_unrelated_edit_goes_through_and_placement_stays() -> None:
    file = _policy()
    stored = _kept(file)
    assert stored is not None
    edited = copy.deepcopy(file)
    edited["metadata"]["labels"] = {"team": "shop"}
    again = testing.stored(merge(stored, edited), _admit(merge(stored, edited), "UPDATE", stored))
    assert again["metadata"]["labels"] == {"team": "shop"}
    assert again["spec"]["placement"] == stored["spec"]["placement"]
    assert again["metadata"]["annotations"] == stored["metadata"]["annotations"]


@pytest.mark.parametrize("release", list(APIS))
def test_the_users_own_placement_change_is_decided_again(release: str) -> None:
    file = _policy()
    stored = _kept(file, release)
    assert stored is not None
    edited = copy.deepcopy(file)
    edited["spec"]["placement"]["clusterAffinity"]["clusterNames"] = ["member-de", "member-pl"]
    sent = merge(stored, edited)
    again = testing.stored(sent, _admit(sent, "UPDATE", stored, release))
    placement = again["spec"]["placement"]
    assert "clusterAffinity" not in placement  # never beside clusterAffinities
    named = {n for t in placement["clusterAffinities"] for n in _names(t)}
    assert named == {"member-de", "member-pl"}
    record = Record.decode(again["metadata"]["annotations"][DECISION])
    assert record.orig["placement.clusterAffinity"] == {"clusterNames": ["member-de", "member-pl"]}


def test_a_field_the_user_writes_over_carbonshifts_is_theirs() -> None:
    stored = _kept(_policy())
    assert stored is not None
    own = copy.deepcopy(stored)
    own["spec"]["placement"]["clusterAffinities"] = [
        {"affinityName": "mine", "clusterNames": ["member-pl"]}
    ]
    again = testing.stored(own, _admit(own, "UPDATE", stored))
    assert again == own


def test_an_edit_of_a_field_carbonshift_changed_is_the_users() -> None:
    """``kubectl edit`` of the division carbonshift wrote: let through as the user wrote
    it (the leader then records the field released), never decided over."""
    stored = _kept(_policy())
    assert stored is not None
    mine = copy.deepcopy(stored)
    mine["spec"]["placement"]["replicaScheduling"] = {
        "replicaSchedulingType": "Divided",
        "replicaDivisionPreference": "Aggregated",
    }
    again = testing.stored(mine, _admit(mine, "UPDATE", stored))
    assert again == mine


def test_a_write_with_a_new_decision_is_not_read_as_a_reapply() -> None:
    """The leader's switch removes what it added before: never put back."""
    stored = _kept(_policy())
    assert stored is not None
    switched = copy.deepcopy(stored)
    switched["spec"]["placement"].pop("clusterAffinities")
    switched["spec"]["placement"]["clusterAffinity"] = {"clusterNames": ["member-fr"]}
    switched["metadata"]["annotations"][DECISION] = '{"v":1,"at":"later"}'
    again = testing.stored(switched, _admit(switched, "UPDATE", stored))
    assert again == switched


def test_an_update_that_changes_no_field_keeps_the_stored_record() -> None:
    """A NodePool decided on every UPDATE keeps its record when only the data time moved."""
    stored = reapply.same_record(
        '{"v":1,"at":"2026-01-01T02:00:00Z","w":1,"own":{"spec.weight":"a"},"orig":{}}',
        '{"v":1,"at":"2026-01-01T03:00:00Z","w":1,"own":{"spec.weight":"a"},"orig":{}}',
    )
    assert stored
    assert not reapply.same_record(
        '{"v":1,"at":"x","own":{"spec.weight":"a"},"orig":{}}',
        '{"v":1,"at":"x","own":{"spec.weight":"b"},"orig":{}}',
    )
    assert not reapply.same_record(None, '{"v":1}')


def _names(term: Mapping[str, Any]) -> list[str]:
    out = list(term.get("clusterNames", []))
    for overflow in term.get("overflowAffinities", []):
        out += overflow.get("clusterNames", [])
    return out


POOLS = [(c, o) for c, sample, _, o in CASES if sample.kind == "NodePool"]


@pytest.mark.parametrize(("case", "pool"), POOLS, ids=[c for c, _ in POOLS])
def test_a_nodepool_decided_on_every_update_is_not_rewritten_when_only_the_hour_moved(
    case: str, pool: dict[str, Any]
) -> None:
    """Admitted at 12:00 and again, unchanged, at 13:00: the stored record stays."""
    document = fleet.config_document()
    document["nodepools"] = {**document["nodepools"], "mutate_on_update": True}
    cfg = config.parse(document)

    def answer(obj: Any, hour: int, grid: Mapping[str, float], old: Any = None) -> bytes:
        when = NOW + timedelta(hours=hour)
        until = when + timedelta(hours=1)
        table = {z: reading(z, g, valid_from=when, valid_to=until) for z, g in grid.items()}
        ctx = Context(config=cfg, table=table, now=when)
        operation: testing.Operation = "CREATE" if old is None else "UPDATE"
        body = orjson.dumps(testing.review(obj, operation=operation, old=old))
        return admission.respond(admission.admit(parse(body), ctx))

    stored = testing.stored(pool, answer(pool, 0, fleet.GRID))
    again = answer(stored, 1, fleet.GRID, stored)
    assert testing.patch_of(again) == [], f"{case}: {again!r}"
