"""No silent keys: a ``carbonshift.io/*`` annotation the decision does not read is named.

A misspelling (``carbonshift.io/max-cluster``) or a key of another kind
(``carbonshift.io/max-pause`` on a PropagationPolicy) would otherwise be ignored without
a word. :func:`webhook.model.vocabulary.knobs` reports it with its other problems, so it
reaches the AdmissionReview's warnings, the preview and the decision annotation (``keys``)
on the one path malformed values take.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from tests.support import NOW
from webhook import testing
from webhook.cli import preview
from webhook.kinds import Context
from webhook.model import vocabulary
from webhook.model.config import Config
from webhook.model.intensity import Reading
from webhook.model.vocabulary import DECISION, UNREAD
from webhook.serve import admission, reviews

MISSPELT = "carbonshift.io/max-cluster"
MISPLACED = vocabulary.MAX_PAUSE


@pytest.fixture
def ctx(config: Config, table: dict[str, Reading]) -> Context:
    return Context(config=config, table=table, now=NOW)


def policy(**annotations: str) -> dict[str, Any]:
    return testing.propagation_policy(
        namespace="shop", annotations=annotations, clusters=["member-fr", "member-de"]
    )


def pool(**annotations: str) -> dict[str, Any]:
    return testing.nodepool("np", enabled=True, annotations=annotations, limits={"cpu": "10"})


def answer(obj: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The webhook's AdmissionReview answer for a CREATE of ``obj``."""
    body = orjson.dumps(testing.review(obj))
    response: dict[str, Any] = orjson.loads(admission.respond(admission.review(body, ctx)))
    return response


def recorded(obj: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    stored = testing.stored(obj, reply)
    record: dict[str, Any] = orjson.loads(stored["metadata"]["annotations"][DECISION])
    return record


# --- the vocabulary --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "scope", "key", "closest"),
    [
        ({MISSPELT: "2"}, "policy", MISSPELT, vocabulary.MAX_CLUSTERS),
        ({"carbonshift.io/stratgey": "fill"}, "policy", "carbonshift.io/stratgey", "strategy"),
        ({"carbonshift.io/max-pauses": "2h"}, "nodepool", "carbonshift.io/max-pauses", "max-pause"),
        ({MISPLACED: "2h"}, "policy", MISPLACED, "carbonshift.io/"),
        ({vocabulary.MAX_CLUSTERS: "2"}, "nodepool", vocabulary.MAX_CLUSTERS, "carbonshift.io/"),
        ({vocabulary.MAX_INTENSITY: "9"}, "nodepool", vocabulary.MAX_INTENSITY, "carbonshift.io/"),
        ({vocabulary.ENABLED: "true"}, "policy", vocabulary.ENABLED, "label"),
    ],
)
def test_unread_keys_are_problems_naming_the_closest_key(
    annotations: dict[str, str], scope: vocabulary.Scope, key: str, closest: str
) -> None:
    [problem] = vocabulary.knobs(annotations, scope).problems
    assert isinstance(problem, vocabulary.UnknownKey)
    assert problem.path == key
    assert closest in problem.message
    warning = vocabulary.warning(problem)
    assert key in warning
    assert len(warning) < 120


def test_the_misspelling_names_the_key_it_meant() -> None:
    [problem] = vocabulary.knobs({MISSPELT: "2"}, "policy").problems
    assert problem.message == f"unknown key; did you mean {vocabulary.MAX_CLUSTERS}?"
    [problem] = vocabulary.knobs({MISPLACED: "2h"}, "policy").problems
    assert problem.message.startswith("not read on policies; did you mean carbonshift.io/")


@pytest.mark.parametrize("scope", ["policy", "nodepool"])
def test_keys_carbonshift_writes_and_other_prefixes_never_warn(scope: vocabulary.Scope) -> None:
    written = {k.name: "x" for k in vocabulary.KEYS if k.written}
    assert DECISION in written
    others = {"e2e.carbonshift.io/rollout": "x", "example.com/max-cluster": "2"}
    valid = {k.name: "true" for k in vocabulary.KEYS if scope in k.scopes}
    problems = vocabulary.knobs({**written, **others, **valid}, scope).problems
    assert not [p for p in problems if isinstance(p, vocabulary.UnknownKey)]


# --- the webhook's answer and the admission handler ------------------------------------------


@pytest.mark.parametrize("key", [MISSPELT, MISPLACED])
def test_the_webhook_warns_and_records_a_policy_key_it_does_not_read(
    ctx: Context, key: str
) -> None:
    obj = policy(**{key: "2"})
    reply = answer(obj, ctx)
    warnings = reply["response"]["warnings"]
    [ours] = [w for w in warnings if key in w]
    assert ours.startswith(f"carbonshift: {key} ignored: ")
    assert "did you mean carbonshift.io/" in ours
    assert recorded(obj, reply)[UNREAD] == {key: ours.split(" ignored: ", 1)[1]}
    # The rest is decided as without the key.
    clean = policy()
    assert testing.stored(obj, reply)["spec"] == testing.stored(clean, answer(clean, ctx))["spec"]


def test_the_admission_handler_warns_about_a_misplaced_nodepool_key(ctx: Context) -> None:
    obj = pool(**{vocabulary.MAX_CLUSTERS: "2", vocabulary.STRATEGY: "weight"})
    request = reviews.request_of(testing.review(obj)["request"])
    outcome = admission.admit(request, ctx)
    [ours] = [w for w in outcome.warnings if vocabulary.MAX_CLUSTERS in w]
    assert "not read on NodePools" in ours
    assert outcome.decision is not None
    keys = orjson.loads(outcome.decision)[UNREAD]
    assert list(keys) == [vocabulary.MAX_CLUSTERS]
    patched = orjson.loads(base64.b64decode(outcome.encoded_patch or ""))
    assert any(op["path"] == "/spec/weight" for op in patched)


def test_a_clean_object_records_no_keys_and_a_fixed_key_drops_them(ctx: Context) -> None:
    clean = policy()
    assert UNREAD not in recorded(clean, answer(clean, ctx))
    obj = policy(**{MISSPELT: "2"})
    stored = testing.stored(obj, answer(obj, ctx))
    # The user fixes the key and asks for a refresh: the record no longer lists it.
    fixed = testing.propagation_policy(
        namespace="shop",
        annotations={
            **{k: v for k, v in stored["metadata"]["annotations"].items() if k != MISSPELT},
            vocabulary.REFRESH: "1",
        },
    )
    fixed["spec"] = stored["spec"]
    body = orjson.dumps(testing.review(fixed, operation="UPDATE", old=stored))
    reply = orjson.loads(admission.respond(admission.review(body, ctx)))
    assert not [w for w in reply["response"].get("warnings", []) if MISSPELT in w]
    assert UNREAD not in recorded(fixed, reply)


def test_a_stored_object_with_an_unread_key_is_left_as_it_is(ctx: Context) -> None:
    obj = policy(**{MISSPELT: "2"})
    stored = testing.stored(obj, answer(obj, ctx))
    again = answer(stored, ctx)
    assert "patch" not in again["response"]
    assert any(MISSPELT in w for w in again["response"]["warnings"])


# --- the preview -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "key"),
    [(policy(**{MISSPELT: "2"}), MISSPELT), (pool(**{MISPLACED + "s": "2h"}), MISPLACED + "s")],
)
def test_the_preview_says_the_same(ctx: Context, obj: dict[str, Any], key: str) -> None:
    [shown] = preview.preview([obj], ctx)
    reply = answer(obj, ctx)
    assert [w for w in shown.outcome.warnings if key in w] == [
        w for w in reply["response"]["warnings"] if key in w
    ]
    assert shown.outcome.decision is not None
    assert key in orjson.loads(shown.outcome.decision)[UNREAD]
    assert key in shown.stored["metadata"]["annotations"][DECISION]
