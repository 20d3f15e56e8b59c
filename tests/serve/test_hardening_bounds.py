"""What requests may make grow, bounded by configuration: the admission memo in bytes, the
journal's lines and metric labels, the region and quantity memos, repeated warnings
(docs/hardening.md, "Bounded by configuration")."""

from __future__ import annotations

import gc
import io
import tracemalloc
from decimal import Decimal

import orjson
import pytest
from prometheus_client import REGISTRY

from tests.support import make_state
from webhook.decision import clusters
from webhook.decision import quantity as quantity_module
from webhook.decision.clusters import MAX_REGION, region_zone
from webhook.decision.quantity import quantity
from webhook.model.config import Config, parse
from webhook.runtime import logs
from webhook.runtime.logs import Repeats
from webhook.serve.answer import Outcome
from webhook.serve.journal import MAX_FIELD, AdmissionJournal
from webhook.serve.memo import DecisionMemo, MemoKey, cost, memo_key
from webhook.serve.reviews import GroupVersionKind
from webhook.serve.state import ServerState

KIND = GroupVersionKind("policy.karmada.io", "v1alpha1", "PropagationPolicy")


def key(i: int, spec_bytes: int) -> MemoKey:
    spec = b'{"n":%d,"pad":"%s"}' % (i, b"x" * spec_bytes)  # exact size, as a review's
    return memo_key(KIND, None, {"carbonshift.io/max-clusters": "2"}, spec, 1, fleet=0)


def outcome(i: int) -> Outcome:
    return Outcome(uid=f"u-{i}", kind="PropagationPolicy", result="unchanged", reason="")


def test_the_memo_holds_at_most_its_bytes_oldest_out_first() -> None:
    memo = DecisionMemo(max_bytes=1 << 20)
    gc.collect()
    tracemalloc.start()
    try:
        held_before = tracemalloc.get_traced_memory()[0]
        for i in range(200):  # 200 distinct 64 KiB specs: 12.8 MiB sent
            memo.put(key(i, 64 << 10), outcome(i))
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - held_before
    finally:
        tracemalloc.stop()
    print(f"\nmemo: 200 decisions of 64 KiB specs, {len(memo)} kept, {memo.bytes} bytes by "
          f"cost, {held} bytes traced")  # fmt: skip
    assert memo.bytes <= 1 << 20
    assert 10 <= len(memo) <= 16
    assert memo.get(key(0, 64 << 10)) is None
    assert memo.get(key(199, 64 << 10)) is not None
    assert held < (1 << 20) * 1.5


def test_a_decision_larger_than_the_memo_is_not_kept_and_zero_keeps_none() -> None:
    memo = DecisionMemo(max_bytes=4096)
    memo.put(key(1, 8192), outcome(1))
    assert (len(memo), memo.bytes) == (0, 0)
    memo.put(key(2, 10), outcome(2))
    assert len(memo) == 1
    assert memo.bytes == cost(key(2, 10), memo.get(key(2, 10)))  # type: ignore[arg-type]
    memo.put(key(2, 10), outcome(2))  # the same decision again: counted once
    assert memo.bytes == cost(key(2, 10), memo.get(key(2, 10)))  # type: ignore[arg-type]
    nothing = DecisionMemo(max_bytes=0)
    nothing.put(key(3, 0), outcome(3))
    assert len(nothing) == 0


async def test_the_server_state_takes_the_memo_bound_from_the_configuration() -> None:
    state = await make_state(parse({"service": {"memo_max_bytes": 12345}}))
    assert state.memo.max_bytes == 12345
    assert ServerState(Config(), state.feed).memo.max_bytes == 32 << 20


@pytest.fixture
def json_logs() -> None:
    logs.configure("info")


def admissions(kind: str) -> float:
    found = REGISTRY.get_sample_value(
        "carbonshift_admissions_total", {"kind": kind, "outcome": "ignored"}
    )
    return found or 0.0


@pytest.mark.usefixtures("json_logs")
async def test_the_journal_cuts_long_strings_and_labels_unknown_kinds_other() -> None:
    out = io.BytesIO()
    journal = AdmissionJournal(out)
    before = admissions("other")
    long = "n" * 100_000
    for i in range(3):
        journal.record(
            Outcome(uid=f"u-{i}" + long, kind=f"Made{i}" + long, namespace=long, name=long,
                    operation=long, result="ignored", reason=long),
            0.001,
        )  # fmt: skip
    journal.flush()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    line = orjson.loads(lines[0])
    for field in ("uid", "kind", "namespace", "name", "operation"):
        assert len(line[field]) == MAX_FIELD
        assert line[field].endswith("...")
    assert len(line["reason"]) == 1024
    assert max(len(raw) for raw in lines) < 3 * 1024
    assert admissions("other") == before + 3
    assert (
        REGISTRY.get_sample_value(
            "carbonshift_admissions_total", {"kind": "Made0" + long, "outcome": "ignored"}
        )
        is None
    )


def test_the_region_memo_keeps_short_names_only() -> None:
    clusters._region_zone.cache_clear()
    assert region_zone("aws", "eu-west-3") == "FR"
    assert region_zone("aws", "r" * (MAX_REGION + 1)) is None
    assert region_zone("a" * 1_000_000, "eu-west-3") is None
    for i in range(10_000):
        region_zone("aws", f"made-up-{i}")
    info = clusters._region_zone.cache_info()
    assert info.currsize <= 4096


def test_repeats_let_a_line_through_once_per_period_and_count_the_rest() -> None:
    repeats = Repeats(seconds=10, size=3)
    assert [repeats.let("a", t) for t in (0, 1, 2, 9.9)] == [0, None, None, None]
    assert repeats.let("a", 10) == 3
    for i in range(10):
        repeats.let(i, 11)
    assert len(repeats) == 3  # bounded whatever the keys


def test_the_quantity_memo_keeps_short_strings_only() -> None:
    quantity_module._cached.cache_clear()
    assert quantity("500m") == Decimal("0.5")
    long = "1" * 100_000
    assert quantity(long) is not None  # parsed, not memoized
    assert quantity_module._cached.cache_info().currsize == 1
