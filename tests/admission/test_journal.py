"""The admission journal: batched log lines and metrics, nothing lost."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import orjson
import pytest
from prometheus_client import REGISTRY

from tests.support import eventually
from webhook.runtime import logs
from webhook.serve.answer import Outcome
from webhook.serve.journal import FLUSH_SECONDS, MAX_BATCH, OTHER, AdmissionJournal


def admitted(i: int, result: str = "patched") -> Outcome:
    return Outcome(
        uid=f"u-{i}",
        kind="JournalKind",
        namespace="shop",
        name=f"web-{i}",
        operation="CREATE",
        result=result,
    )


def counted(result: str) -> float:
    value = REGISTRY.get_sample_value(
        "carbonshift_admissions_total", {"kind": OTHER, "outcome": result}
    )  # JournalKind is no handled kind: its label is "other"
    return value or 0.0


@pytest.fixture(autouse=True)
def json_logs() -> None:
    logs.configure("info")


async def test_lines_are_written_shortly_after_with_their_own_time() -> None:
    out = io.BytesIO()
    journal = AdmissionJournal(out)
    before = counted("patched")
    started = datetime.now(UTC)
    for i in range(3):
        journal.record(admitted(i), 0.0004)
    assert out.getvalue() == b""
    assert len(journal) == 3
    await eventually(
        lambda: len(out.getvalue().splitlines()) >= 3, "the batch written", seen=out.getvalue
    )
    lines = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert [line["uid"] for line in lines] == ["u-0", "u-1", "u-2"]
    first = lines[0]
    assert first["event"] == "admission"
    assert first["level"] == "info"
    assert first["kind"] == "JournalKind"
    assert first["outcome"] == "patched"
    assert first["duration_ms"] == 0.4
    assert first["name"] == "web-0"
    stamped = datetime.fromisoformat(first["timestamp"])
    assert 0 <= (stamped - started).total_seconds() < FLUSH_SECONDS  # admission time, not flush
    assert counted("patched") == before + 3


async def test_a_full_batch_and_an_explicit_flush_write_at_once() -> None:
    out = io.BytesIO()
    journal = AdmissionJournal(out)
    for i in range(MAX_BATCH):
        journal.record(admitted(i, "skipped"), 0.001)
    assert len(out.getvalue().splitlines()) == MAX_BATCH
    assert len(journal) == 0
    journal.record(admitted(MAX_BATCH, "skipped"), 0.001)
    journal.flush()  # what /metrics and shutdown do
    assert len(out.getvalue().splitlines()) == MAX_BATCH + 1
    journal.flush()
    assert len(out.getvalue().splitlines()) == MAX_BATCH + 1
