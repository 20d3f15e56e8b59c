"""Every answer is byte-identical in every process, and the stored object is left alone.

Replicas, the leader and ``carbonshift mutate`` each run in their own process, each with
its own string hash seed. An answer that followed the iteration order of a set (or of a
dict filled from one) would differ between them, and an object stored by one would get
a patch from the next that only reorders its decision annotation. :mod:`tests.admission.answers`
computes a fixed set of admission and scheduler answers through the webhook's own code;
here it runs under several ``PYTHONHASHSEED`` values and the outputs must be equal.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.admission import answers
from tests.semantics import fleet
from webhook import testing
from webhook.model.vocabulary import DECISION
from webhook.serve import admission

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ("0", "1", "2", "3", "random")


def run(seed: str, *args: str, given: bytes = b"") -> bytes:
    """``python -m tests.admission.answers`` under ``PYTHONHASHSEED=seed``: its output."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.admission.answers", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONHASHSEED": seed},
        input=given,
        capture_output=True,
        check=True,
        timeout=120,
    )
    return done.stdout


def lines(output: bytes, suffix: str | tuple[str, ...]) -> list[tuple[str, str]]:
    """The ``(case, text)`` lines of ``output`` whose case ends with ``suffix``."""
    found = (orjson.loads(line) for line in output.splitlines())
    return [(case, text) for case, text in found if case.endswith(suffix)]


def patched(found: list[tuple[str, str]]) -> list[str]:
    """The cases whose answer carries a patch."""
    return [case for case, answer in found if testing.patch_of(answer.encode())]


@pytest.fixture(scope="module")
def outputs() -> dict[str, bytes]:
    return {seed: run(seed) for seed in SEEDS}


def test_answers_are_byte_identical_under_every_hash_seed(outputs: dict[str, bytes]) -> None:
    first = outputs[SEEDS[0]].splitlines()
    assert len(first) > 1000
    for seed in SEEDS[1:]:
        other = outputs[seed].splitlines()
        assert len(other) == len(first)
        differ = [orjson.loads(a)[0] for a, b in zip(first, other, strict=True) if a != b]
        assert differ == [], f"PYTHONHASHSEED={seed}: {len(differ)} answers differ: {differ[:5]}"


def test_the_stored_object_submitted_again_gets_no_patch(outputs: dict[str, bytes]) -> None:
    again = lines(outputs[SEEDS[-1]], answers.AGAIN)
    assert len(again) > 1000
    assert patched(again) == []


@pytest.mark.parametrize("seed", ["1", "random"])
def test_an_object_stored_by_another_process_gets_no_patch(
    outputs: dict[str, bytes], seed: str
) -> None:
    stored = lines(outputs["0"], answers.STORED)
    given = b"".join(orjson.dumps(entry) + b"\n" for entry in stored)
    again = lines(run(seed, "--again", given=given), answers.STORED)
    assert len(again) == len(stored) > 500
    assert patched(again) == []


def test_an_annotation_written_in_another_key_order_is_left_as_stored() -> None:
    policy = testing.propagation_policy(
        namespace="shop", placement={}, clusters=["member-fr", "member-de"]
    )
    obj = fleet.with_variant(policy, {"carbonshift.io/max-clusters": "1"})
    ctx = answers.context()
    kept = testing.stored(obj, admission.respond(admission.review(answers.review(obj), ctx)))
    annotations = kept["metadata"]["annotations"]
    doc = orjson.loads(annotations[DECISION])
    assert len(doc["own"]) > 1
    for key in ("own", "orig"):  # as a process with another hash seed wrote them before
        doc[key] = dict(reversed(doc[key].items()))
    annotations[DECISION] = orjson.dumps(doc).decode()
    again = admission.respond(admission.review(answers.review(kept), ctx))
    assert testing.patch_of(again) == []
