"""Every answer the webhook gives for a fixed set of inputs, as bytes.

Run as ``python -m tests.admission.answers`` (from the repository root): prints one JSON line per
answer, ``[case, bytes as text]``. :mod:`tests.admission.test_determinism` runs it under several
``PYTHONHASHSEED`` values and compares the output byte for byte, so any answer that
depends on the iteration order of a set or of a hashed key shows up as a difference.

The inputs: every corpus object with every annotation variant
(:mod:`tests.semantics.fleet`), each as a raw CREATE AdmissionReview through
:func:`webhook.serve.admission.review` (what ``POST /mutate`` runs, memo included), then the
stored object (the patch applied) submitted again as a CREATE and as an UPDATE with a new
``carbonshift.io/refresh``; and scheduler API requests through the endpoints' answer
functions (:data:`webhook.serve.schedapi.ROUTES`).
"""

from __future__ import annotations

import asyncio
import copy
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

import orjson

from tests.semantics import fleet
from tests.support import NOW, FixedProvider
from webhook import kinds, testing
from webhook.feed import IntensityFeed
from webhook.model.intensity import Reading
from webhook.model.vocabulary import REFRESH
from webhook.serve import admission, schedapi
from webhook.serve.state import ServerState
from webhook.testing import stored

Answer = tuple[str, bytes]

STORED = "stored"
"""Case suffix of the object as stored after the first answer (the object, not an answer)."""
AGAIN = ("again-create", "again-update")
"""Case suffixes of the stored object submitted again: these answers carry no patch."""


def review(
    obj: Mapping[str, Any],
    operation: testing.Operation = "CREATE",
    old: Mapping[str, Any] | None = None,
) -> bytes:
    """The raw AdmissionReview kube-apiserver would send for ``obj``."""
    return orjson.dumps(testing.review(obj, operation=operation, old=old, uid="uid-1"))


def admissions() -> Iterator[Answer]:
    ctx, memo = context(), admission.DecisionMemo()
    for case, _, _, obj in fleet.cases():
        first = admission.respond(admission.review(review(obj, "CREATE", None), ctx, memo))
        yield case, first
        kept = stored(obj, first)
        yield f"{case} {STORED}", orjson.dumps(kept)
        again = admission.review(review(kept, "CREATE", None), ctx, memo)
        yield f"{case} {AGAIN[0]}", admission.respond(again)
        refreshed = copy.deepcopy(kept)
        refreshed["metadata"].setdefault("annotations", {})[REFRESH] = "again"
        update = admission.review(review(refreshed, "UPDATE", kept), ctx, memo)
        yield f"{case} {AGAIN[1]}", admission.respond(update)


def readmissions(lines: Iterable[bytes]) -> Iterator[Answer]:
    """CREATE answers for objects stored by another process (its ``stored`` lines)."""
    ctx, memo = context(), admission.DecisionMemo()
    for line in lines:
        case, text = orjson.loads(line)
        obj = orjson.loads(text)
        yield case, admission.respond(admission.review(review(obj, "CREATE", None), ctx, memo))


def context() -> kinds.Context:
    """The fixed fleet, its intensities and time (memo on, as in the server)."""
    return kinds.Context(config=fleet.CONFIG, table=fleet.table(), now=NOW, generation=1)


class _Fixed(FixedProvider):
    """The test provider, serving :func:`fleet.table` (fixed times: identical answers)."""

    def __init__(self) -> None:
        super().__init__({zone: r.value for zone, r in fleet.table().items()})

    async def latest(self, zone: str) -> Reading:
        return fleet.table()[zone]


def _clusters() -> list[dict[str, Any]]:
    known = [{"name": n} for n in sorted(fleet.CONFIG.clusters)]
    return [
        *known,
        {"name": "zoned", "zone": "SE"},
        {"name": "regioned", "provider": "aws", "region": "eu-west-3"},
        {"name": "ghost"},
        {"name": "labelled", "labels": {"b": "2", "a": "1"}, "zones": ["x", "y"]},
    ]


def _nodes() -> list[dict[str, Any]]:
    grid = {"metadata": {"name": "grid", "labels": {"carbonshift.io/grid-zone": "FR"}}}
    topo = {"metadata": {"name": "topo", "labels": {"topology.kubernetes.io/zone": "us-west-2c"}}}
    region = {
        "metadata": {"name": "region", "labels": {"topology.kubernetes.io/region": "eu-north-1"}},
        "spec": {"providerID": "aws:///eu-north-1a/i-1"},
    }
    return [grid, topo, region, {"metadata": {"name": "bare"}}]


def scheduler_requests() -> Iterator[tuple[str, bytes]]:
    for limit in (None, "100", "10"):
        annotations = {} if limit is None else {"carbonshift.io/max-intensity": limit}
        karmada = {"clusters": _clusters(), "workload": {"annotations": annotations}}
        pod = {"metadata": {"annotations": annotations}}
        extender = {"Pod": pod, "Nodes": {"items": _nodes()}}
        names = {"Pod": pod, "NodeNames": ["n-b", "n-a"]}
        for path in ("/v1/karmada/filter", "/v1/karmada/score"):
            yield f"{path} {limit}", orjson.dumps(karmada)
        for path in ("/v1/extender/filter", "/v1/extender/prioritize"):
            yield f"{path} {limit}", orjson.dumps(extender)
            yield f"{path} names {limit}", orjson.dumps(names)


async def scheduler() -> list[Answer]:
    feed = IntensityFeed(
        [_Fixed()], fleet.GRID, max_age_seconds=timedelta(days=1).total_seconds(), clock=lambda: NOW
    )
    await feed.refresh_once()
    state = ServerState(fleet.CONFIG, feed)
    schedapi.utcnow = lambda: NOW  # type: ignore[attr-defined]  # data ages from a fixed now
    return [
        (case, schedapi.ROUTES[case.split()[0]](state, raw)) for case, raw in scheduler_requests()
    ]


def main(argv: Sequence[str]) -> None:
    """All answers; with ``--again``, the answers for the stored objects on stdin."""
    if list(argv) == ["--again"]:
        found = list(readmissions(sys.stdin.buffer))
    else:
        found = [*admissions(), *asyncio.run(scheduler())]
    out = sys.stdout.buffer
    for case, answer in found:
        out.write(orjson.dumps([case, answer.decode()]) + b"\n")


if __name__ == "__main__":
    main(sys.argv[1:])
