"""An UPDATE of a managed object: the user's own file applied again.

Appliers send back what the user wrote, not what carbonshift stored. ``kubectl apply``
(client-side, Argo CD's default) puts back every field of the file the live object lacks:
a policy's ``clusterAffinity`` that carbonshift replaced with its ``clusterAffinities``
reappears beside them, which Karmada's webhook refuses. Server-side apply (Flux, Argo CD's
``ServerSideApply=true``) re-asserts the fields its manager owns, and can remove a field
that carbonshift added under the applier's name, its decision annotation included.

:func:`settle` reads such an UPDATE against the stored object and the decision record
stored with it. For each field carbonshift owns (record ``own``) the incoming value is:

- what carbonshift wrote: nothing to do;
- the user's original (record ``orig``; absent when the field was absent), whole or
  merged over what carbonshift wrote (:func:`reasserts`): the file re-asserted it, which
  is no edit. What is stored goes back in (:attr:`Settled.changes`),
  so re-applying an unchanged file stores the very same object: no write, no new
  resourceVersion, no ``kubectl diff``;
- another value of a field of the user's that carbonshift replaced with its own (a
  policy's ``clusterAffinity``, replaced by ``clusterAffinities``): the user changed their
  own field in the file (:attr:`Settled.edited`): carbonshift decides again from the new
  value, as on CREATE (let through, it would stand beside carbonshift's replacement);
- another value of a field carbonshift wrote (``kubectl edit`` of its placement, a file
  that now sets the field itself): the user wrote the field: it is let through as theirs,
  and the leader records it released.

A decision annotation the applier removed is put back too, and so is its line
(``carbonshift.io/reason``, which carbonshift owns as it owns the record). Only fields
carbonshift still owns in the stored object are read: one the user took back earlier is
theirs already. An UPDATE that writes a decision annotation of its own (the leader's
switch) is no applier's and is not read here.

Pure: the two objects and the kind's owned-field paths in, changes out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from webhook.decision.follow import apply
from webhook.decision.outcome import REMOVE, Change, Path
from webhook.decision.record import Record
from webhook.model.objects import dig, meta_of
from webhook.model.vocabulary import DECISION, REASON

VOLATILE = frozenset({"at", "provider", "clusters"})
"""Decision record body entries that move with the data alone (when, from which provider,
each cluster's reading): an UPDATE that changes no field keeps the stored record rather
than rewrite the object for them (:func:`same_record`)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Settled:
    """What an UPDATE of a managed object re-asserted, changed and took over."""

    obj: dict[str, Any]
    """The incoming object with :attr:`changes` made: what carbonshift reads on."""
    changes: tuple[Change, ...] = ()
    """What puts carbonshift's stored values (and its annotation) back."""
    restored: tuple[str, ...] = ()
    """Record keys the applier re-asserted with the user's original value."""
    edited: tuple[str, ...] = ()
    """Record keys of user fields carbonshift replaced whose value the file changed:
    carbonshift decides again."""

    @property
    def reason(self) -> str:
        """What the UPDATE came to when nothing is decided again (a log line's reason)."""
        names = ", ".join(key.rsplit(".", 1)[-1] for key in self.restored)
        if names:
            return f"re-applied: {names} as the user wrote it kept as carbonshift placed it"
        if self.changes:
            return f"re-applied: the {DECISION} and {REASON} annotations put back"
        return ""


def settle(
    old: Mapping[str, Any] | None, new: Mapping[str, Any], fields: Mapping[str, Path]
) -> Settled | None:
    """Read the UPDATE of ``old`` (as stored) to ``new`` (as sent); None when ``old``
    carries no decision of carbonshift's that owns a field."""
    if old is None:
        return None
    text = meta_of(old).annotations.get(DECISION)
    previous = Record.decode(text)
    if not text or not previous.own:
        return None
    sent = meta_of(new).annotations.get(DECISION)
    if sent is not None and sent != text:
        return None  # a new decision written with it (the leader's switch): not an applier's
    changes: list[Change] = []
    restored: list[str] = []
    edited: list[str] = []
    for key in sorted(previous.own):
        path = where(key, fields)
        if path is None:
            continue
        incoming, held = dig(new, *path), dig(old, *path)
        if previous.owns(key, incoming) or not previous.owns(key, held):
            continue
        original = previous.orig.get(key)
        if reasserts(incoming, original, held):
            changes.append(Change(path, REMOVE if held is None else held))
            restored.append(key)
        elif held is None and original is not None:
            edited.append(key)  # the user's own field, which carbonshift replaced, changed
    if sent is None:
        changes.append(Change(("metadata", "annotations", DECISION), text))
    said = meta_of(old).annotations.get(REASON)
    if said is not None and meta_of(new).annotations.get(REASON) != said:
        changes.append(Change(("metadata", "annotations", REASON), said))  # its line, likewise
    obj = apply(new, changes) if changes else dict(new)
    return Settled(obj, tuple(changes), tuple(restored), tuple(edited))


def reasserts(incoming: object, original: object, held: object) -> bool:
    """Whether ``incoming`` is the user's ``original`` applied over carbonshift's ``held``
    value: every part of the original as the user wrote it, anything else of the object
    as carbonshift wrote it or gone. Client-side apply merges the file into the live
    object (a mapping key by key, anything else whole); server-side apply drops what
    its manager owned and no longer sends."""
    if not isinstance(original, Mapping):
        return incoming == original
    if not isinstance(incoming, Mapping):
        return False
    wrote = held if isinstance(held, Mapping) else {}
    for key, value in incoming.items():
        if key in original:
            if not reasserts(value, original[key], wrote.get(key)):
                return False
        elif key not in wrote or wrote[key] != value:
            return False
    return all(key in incoming for key in original)


def where(key: str, fields: Mapping[str, Path]) -> Path | None:
    """Where the field of record key ``key`` lives (``fields``: prefix -> parent path)."""
    for prefix, parent in fields.items():
        if key.startswith(prefix):
            return (*parent, key[len(prefix) :])
    return None


def same_record(stored: str | None, written: str | None) -> bool:
    """Whether ``written`` records the same decision as ``stored``: the same fields owned
    with the same originals, the same notes, only :data:`VOLATILE` entries moved."""
    if not stored or not written:
        return False
    before, after = Record.decode(stored), Record.decode(written)
    if dict(before.own) != dict(after.own):
        return False
    if dict(before.orig) != dict(after.orig):
        return False
    keep = {k: v for k, v in before.body.items() if k not in VOLATILE}
    return keep == {k: v for k, v in after.body.items() if k not in VOLATILE}
