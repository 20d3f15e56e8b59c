"""Recent admission decisions by their exact inputs, so identical reviews are answered once."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from webhook.kinds import Context
from webhook.model.objects import meta_of
from webhook.model.vocabulary import ours
from webhook.serve.answer import Outcome, tail
from webhook.serve.reviews import AdmissionRequest, GroupVersionKind, Head


class DecisionMemo:
    """Recent decisions by their exact inputs, so identical reviews are answered once.

    GitOps controllers re-apply and server-side dry-run the same manifests over and
    over, and fleets stamp out many policies from one template. A decision depends only
    on the object's kind, its ``carbonshift.io/*`` labels and annotations (the
    vocabulary), whether it has annotations at all (the patch adds the map or a key to
    it), its spec, the intensities in memory and the member clusters (the fleet
    inventory's generation: a relabelled Cluster is seen by the next admission): those
    form the key. The object's name,
    uid and other annotations (``kubectl.kubernetes.io/last-applied-configuration``
    repeats the name) do not. Only CREATEs are kept: a recomputation on UPDATE also
    depends on how long the placement has been in force.

    Bounded twice, oldest out first: at most ``size`` decisions and ``max_bytes`` of what
    they hold (the key's spec, labels and annotations, the patch, the answer's bytes;
    :func:`cost`), since a caller decides how large a spec is (up to the 8 MiB body). A
    decision larger than ``max_bytes`` alone is not kept.
    """

    def __init__(self, size: int = 4096, max_bytes: int = 32 << 20) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self._entries: dict[MemoKey, _Memo] = {}
        self._bytes = 0

    @staticmethod
    def key(request: AdmissionRequest, ctx: Context) -> MemoKey | None:
        """The key of a request built in Python (the server keys raw reviews itself)."""
        obj = request.object
        if ctx.generation is None or obj is None or request.operation != "CREATE":
            return None  # UPDATE decisions also depend on time (minimum dwell)
        meta = meta_of(obj).raw
        try:
            spec = orjson.dumps(obj.get("spec"))
        except TypeError:
            return None
        labels, annotations = meta.get("labels"), meta.get("annotations")
        return memo_key(
            request.kind, labels, annotations, spec, ctx.generation, fleet=ctx.fleet_generation
        )

    def get(self, key: MemoKey) -> _Memo | None:
        return self._entries.get(key)

    def put(self, key: MemoKey, outcome: Outcome) -> None:
        """Keep ``outcome`` (oldest entries go first once full)."""
        memo = _Memo(
            outcome.result,
            outcome.reason,
            tuple(outcome.warnings),
            outcome.patch,
            outcome.decision,
            outcome.encoded_patch,
            tail(outcome),
        )
        held = cost(key, memo)
        if held > self.max_bytes:
            return
        entries = self._entries
        if (old := entries.pop(key, None)) is not None:
            self._bytes -= cost(key, old)
        entries[key] = memo
        self._bytes += held
        while len(entries) > self.size or self._bytes > self.max_bytes:
            oldest = next(iter(entries))
            self._bytes -= cost(oldest, entries.pop(oldest))

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        """What the decisions kept hold, by :func:`cost`."""
        return self._bytes


MemoKey = tuple[
    str, str, tuple[tuple[str, str], ...], bool, tuple[tuple[str, str], ...], bytes, int, int
]
"""group, kind, carbonshift.io labels, has annotations, carbonshift.io annotations, spec
(JSON), intensity table generation, fleet generation."""


def memo_key(
    kind: GroupVersionKind,
    labels: object,
    annotations: object,
    spec: bytes,
    generation: int,
    *,
    fleet: int,
) -> MemoKey:
    return (
        kind.group,
        kind.kind,
        ours(labels) if isinstance(labels, dict) else (),
        annotations is not None,
        ours(annotations) if isinstance(annotations, dict) else (),
        spec,
        generation,
        fleet,
    )


ENTRY_BYTES = 1024
"""A decision's own objects (key tuple, record, outcome fields), beside its strings."""


def cost(key: MemoKey, memo: _Memo) -> int:
    """About the bytes one decision holds: its key's spec, labels and annotations, the
    answer's bytes, the patch (base64 and as objects: three times the base64), the
    warnings and reason, and :data:`ENTRY_BYTES`."""
    pairs = (*key[2], *key[4])
    return (
        ENTRY_BYTES
        + len(key[5])
        + sum(len(k) + len(v) for k, v in pairs)
        + len(memo.tail)
        + 4 * len(memo.encoded_patch or "")
        + len(memo.reason)
        + sum(len(w) for w in memo.warnings)
    )


@dataclasses.dataclass(frozen=True, slots=True)
class _Memo:
    result: str
    reason: str
    warnings: tuple[str, ...]
    patch: list[dict[str, Any]]
    decision: str | None
    encoded_patch: str | None
    tail: bytes
    """The response after the uid (:func:`webhook.serve.answer.respond`)."""

    def answer(self, request: Head, name: str, namespace: str) -> Outcome:
        """The outcome for ``request`` (named ``name`` in ``namespace``): this decision."""
        return Outcome(
            request.uid,
            request.kind.kind,
            namespace,
            name,
            request.operation,
            self.result,
            self.reason,
            self.warnings,
            self.patch,
            self.decision,
            self.encoded_patch,
            self.tail,
        )
