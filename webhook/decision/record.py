"""The ``carbonshift.io/decision`` annotation and field ownership.

The annotation is compact JSON that tells a person why the object looks the way it
does (provider, data time, per-cluster zone/intensity/estimated/weight) and tells
carbonshift which fields it wrote: for every field it changed, the user's original
value (``orig``) and a fingerprint of what carbonshift wrote (``own``). A field whose
current value no longer matches its fingerprint has been edited by someone else and
belongs to them again.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

VERSION = 1


class Sealed(dict[str, Any]):
    """A decoded record's mapping: shared by every reader of the object, so it refuses
    writes (:meth:`Record.decode`)."""

    def _refuse(self, *_: object, **__: object) -> None:
        raise TypeError("a decoded decision record is read-only: build a new Record")

    __setitem__ = __delitem__ = _refuse
    update = pop = popitem = setdefault = clear = _refuse  # type: ignore[assignment]


def fingerprint(value: object) -> str:
    """Short stable hash of a JSON value."""
    return _digest(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))


@functools.lru_cache(maxsize=256)
def _digest(data: bytes) -> str:
    """The fingerprint of a value serialized as ``data`` (sorted keys).

    Kept for the last few serializations: a pass fingerprints each field a policy holds
    several times (the user's edits, the user's view, the new record's ownership), and
    many policies hold the same field values. Keyed by the bytes themselves, the memo
    answers exactly what hashing them again would, whatever became of the value."""
    return hashlib.blake2s(data, digest_size=6).hexdigest()


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterFacts:
    """One cluster of a decision record's ``clusters``, read liberally (a missing or
    wrong-typed field is None)."""

    zone: str | None = None
    intensity: float | None = None
    """``g``: gCO2eq/kWh at the decision."""
    weight: int | None = None
    """``w``: the static weight written, if any."""
    tier: int | None = None
    """``t``: the ordered fill's tier (0 = the greenest)."""

    @classmethod
    def of(cls, entry: object) -> ClusterFacts:
        if type(entry) is not dict and not isinstance(entry, Mapping):
            return cls()
        zone, g, w, t = entry.get("zone"), entry.get("g"), entry.get("w"), entry.get("t")
        return cls(
            zone if isinstance(zone, str) else None,
            float(g) if isinstance(g, int | float) and not isinstance(g, bool) else None,
            w if type(w) is int or (isinstance(w, int) and not isinstance(w, bool)) else None,
            t if type(t) is int or (isinstance(t, int) and not isinstance(t, bool)) else None,
        )


@dataclasses.dataclass(slots=True)
class Record:
    """What the decision annotation holds."""

    body: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Human-facing facts: provider, data time, clusters, class, warnings count..."""
    orig: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Field name -> the user's value before carbonshift changed it (None: absent)."""
    own: dict[str, str] = dataclasses.field(default_factory=dict)
    """Field name -> fingerprint of the value carbonshift wrote."""

    def encode(self) -> str:
        """Compact JSON for the annotation value: the same text in every process.

        ``own`` and ``orig`` are keyed by field names that deciders may collect in sets,
        whose order follows the process's string hash seed: they are written sorted, so
        a replica, the leader and ``carbonshift mutate`` all write the same annotation
        for the same decision (and an object stored by one is left alone by another).
        """
        doc: dict[str, Any] = {"v": VERSION, **self.body}
        if self.own:
            doc["own"] = dict(sorted(self.own.items()))
            doc["orig"] = dict(sorted(self.orig.items()))
        return orjson.dumps(doc).decode()

    @classmethod
    def decode(cls, text: str | None) -> Record:
        """Parse an annotation; anything unreadable counts as no previous decision.

        Decoded once: the readers of one object (the re-evaluation step, the kind's
        decider, the leader's Event check) are handed the same record, whose mappings
        refuse writes (a decision builds a new record, never edits the one it read)."""
        return _decoded(text) if text else cls()

    @property
    def clusters(self) -> dict[str, ClusterFacts]:
        """The clusters the decision weighed, by name (empty without any)."""
        found = self.body.get("clusters")
        if not isinstance(found, Mapping):
            return {}
        return {str(name): ClusterFacts.of(entry) for name, entry in found.items()}

    @property
    def entries(self) -> Mapping[object, object]:
        """``clusters`` as stored (:attr:`clusters` without reading each entry)."""
        found = self.body.get("clusters")
        return found if type(found) is dict or isinstance(found, Mapping) else {}

    @property
    def since(self) -> str | None:
        """``since``: when the placement in force was put in force (RFC 3339)."""
        found = self.body.get("since")
        return found if isinstance(found, str) else None

    @property
    def at(self) -> str | None:
        """``at``: when the decision was made (RFC 3339)."""
        found = self.body.get("at")
        return found if isinstance(found, str) else None

    @property
    def paused(self) -> bool:
        """``paused``: a NodePool held paused by this decision."""
        return bool(self.body.get("paused"))

    @property
    def step(self) -> object:
        """``step``: a NodePool ladder's step (its share), if any."""
        return self.body.get("step")

    @property
    def left(self) -> list[dict[str, Any]]:
        """``left``: the rules carbonshift left unapplied, and why."""
        found = self.body.get("left")
        return [x for x in found if isinstance(x, dict)] if isinstance(found, list) else []

    def owns(self, field: str, current: object) -> bool:
        """True when ``current`` is still exactly what carbonshift wrote to ``field``."""
        return field in self.own and self.own[field] == fingerprint(current)


def unchanged_text(stored: str | None, encoded: str) -> str:
    """The annotation to write for a record encoded as ``encoded``: ``stored`` when it
    already holds the same record with its keys in another order (written before they
    were sorted), so an unchanged decision never rewrites the annotation; else
    ``encoded``."""
    if stored is None or stored == encoded:
        return encoded
    try:
        same = orjson.loads(stored) == orjson.loads(encoded)
    except orjson.JSONDecodeError:
        same = False
    return stored if same else encoded


def user_view(current: Mapping[str, Any], previous: Record, prefix: str) -> dict[str, Any]:
    """``current`` with every field carbonshift still owns put back to the user's value.

    Record keys are ``prefix + name`` (e.g. ``placement.replicaScheduling``); only the
    keys under ``prefix`` are considered.
    """
    base = dict(current)
    for key in previous.own:
        if not key.startswith(prefix):
            continue
        name = key[len(prefix) :]
        if previous.owns(key, current.get(name)):
            original = previous.orig.get(key)
            if original is None:
                base.pop(name, None)
            else:
                base[name] = original
    return base


# --- re-evaluation: switch history and fields the user took back --------------------------

SWITCHES = "switches"
"""Body key: the last placement switches the re-evaluation made, oldest first; each
``{"t": time, "from": weights, "to": weights, "before": g, "after": g}`` (expected
intensities in gCO2eq/kWh at the time of the switch)."""
MAX_SWITCHES = 5
USER = "user"
"""Body key: the fields carbonshift wrote that a user edited since (sorted record keys);
carbonshift no longer manages them."""


def switches(record: Record) -> list[dict[str, Any]]:
    """The recorded switches, oldest first (malformed entries dropped)."""
    found = record.body.get(SWITCHES)
    return [s for s in found if isinstance(s, dict)] if isinstance(found, list) else []


def with_switch(record: Record, entry: Mapping[str, Any]) -> Record:
    """``record`` with ``entry`` appended to its switches (the last :data:`MAX_SWITCHES`)."""
    kept = [*switches(record), dict(entry)][-MAX_SWITCHES:]
    return Record(body={**record.body, SWITCHES: kept}, orig=record.orig, own=record.own)


def history(previous: Record) -> dict[str, Any]:
    """The record body entries a new decision carries over from ``previous`` (its
    switches and the fields users took back), so a refresh keeps the object's story."""
    return {k: previous.body[k] for k in (SWITCHES, USER) if k in previous.body}


def user_fields(record: Record) -> list[str]:
    """The record keys recorded as taken back by a user."""
    found = record.body.get(USER)
    return sorted(k for k in found if isinstance(k, str)) if isinstance(found, list) else []


def released(record: Record, keys: Iterable[str]) -> Record:
    """``record`` no longer owning ``keys``: they are recorded under :data:`USER`."""
    gone = set(keys)
    body = dict(record.body)
    users = sorted(set(user_fields(record)) | gone)
    if users:
        body[USER] = users
    return Record(
        body=body,
        orig={k: v for k, v in record.orig.items() if k not in gone},
        own={k: v for k, v in record.own.items() if k not in gone},
    )


@functools.lru_cache(maxsize=8)
def _decoded(text: str) -> Record:
    """:meth:`Record.decode` of a non-empty annotation (the last few, kept: one object's
    readers in a pass ask for the same text one after another)."""
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return Record()
    if not isinstance(doc, dict) or doc.get("v") != VERSION:
        return Record()
    own = doc.pop("own", {})
    orig = doc.pop("orig", {})
    doc.pop("v", None)
    if not isinstance(own, dict) or not isinstance(orig, dict):
        return Record(body=Sealed(doc), orig=Sealed(), own=Sealed())
    mine = {k: v for k, v in own.items() if isinstance(v, str)}
    return Record(body=Sealed(doc), orig=Sealed(orig), own=Sealed(mine))
