"""JSON ``null`` reads as Kubernetes' Go decoders read it.

kube-apiserver and other Go clients may send ``null`` for a field they leave unset; Go
reads it as the field's zero value (``""``, ``{}``, ``[]``, a nil pointer). A review
refused for it (400) would leave the object stored unmutated, so every such null decodes
like an absent field, on the first (memo) pass and the full one alike.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import orjson
import pytest

from tests.support import NOW
from webhook import testing
from webhook.kinds import Context
from webhook.model import validation
from webhook.model.config import Config
from webhook.model.intensity import Reading
from webhook.model.validation import InvalidInput
from webhook.serve import admission, reviews

PP = testing.propagation_policy(namespace="shop")
REVIEW: dict[str, Any] = testing.review(PP, uid="u-1")


def with_null(path: str, review: dict[str, Any] = REVIEW) -> dict[str, Any]:
    """``review`` with the field at the dotted ``path`` set to null."""
    out = copy.deepcopy(review)
    *parents, leaf = path.split(".")
    node = out
    for key in parents:
        node = node[key]
    node[leaf] = None
    return out


@pytest.fixture
def ctx(config: Config, table: dict[str, Reading]) -> Context:
    return Context(config=config, table=table, now=NOW, generation=1)


REQUEST_FIELDS = [
    "request.namespace",
    "request.name",
    "request.operation",
    "request.kind",
    "request.kind.group",
    "request.resource",
    "request.subResource",
    "request.userInfo",
    "request.userInfo.groups",
    "request.oldObject",
    "request.dryRun",
    "request.options",
    "apiVersion",
    "kind",
    "request.object.metadata.annotations",
    "request.object.metadata.labels",
    "request.object.metadata.name",
    "request.object.metadata",
    "request.object.spec.placement",
]


@pytest.mark.parametrize("path", REQUEST_FIELDS)
def test_a_null_field_is_read_as_absent(path: str, ctx: Context) -> None:
    body = orjson.dumps(with_null(path))
    memo = admission.DecisionMemo()
    for kept in (None, memo, memo):  # the full decode; the first pass, then a memo hit
        outcome = admission.review(body, ctx, kept)
        assert outcome.uid == "u-1"
        assert outcome.result in ("patched", "unchanged", "skipped", "ignored")
        assert admission.unchanged(body, "shed", "w").uid == "u-1"  # the head alone


def test_zero_values_are_those_of_go(ctx: Context) -> None:
    review = REVIEW
    for path in ("request.namespace", "request.dryRun", "request.kind", "request.operation"):
        review = with_null(path, review)
    request = reviews.parse(orjson.dumps(review))
    assert (request.namespace, request.operation, request.dryRun) == ("", "", False)
    assert request.kind == reviews.GroupVersionKind()
    assert admission.review(orjson.dumps(review), ctx).result == "ignored"  # kind ""


def test_a_create_with_a_null_namespace_is_still_mutated(ctx: Context) -> None:
    outcome = admission.review(orjson.dumps(with_null("request.namespace")), ctx)
    assert outcome.result == "patched"
    assert outcome.namespace == "shop"  # from the object's metadata


def test_null_maps_in_the_object_get_a_patch_that_replaces_them(ctx: Context) -> None:
    body = orjson.dumps(with_null("request.object.metadata.annotations"))
    outcome = admission.review(body, ctx, admission.DecisionMemo())
    assert {"op": "add", "path": "/metadata/annotations"} in [
        {k: op[k] for k in ("op", "path")} for op in outcome.patch
    ]


def test_a_delete_without_an_object_is_answered(ctx: Context) -> None:
    review = with_null("request.object")
    review["request"]["operation"] = "DELETE"
    review["request"]["oldObject"] = PP
    outcome = admission.review(orjson.dumps(review), ctx, admission.DecisionMemo())
    assert (outcome.result, outcome.patch) == ("skipped", [])


def test_null_map_values_and_list_items_are_zero_values(ctx: Context) -> None:
    review = copy.deepcopy(REVIEW)
    review["request"]["object"]["metadata"]["labels"] = {"team": None}
    review["request"]["object"]["metadata"]["annotations"] = {"note": None}
    outcome = admission.review(orjson.dumps(review), ctx, admission.DecisionMemo())
    assert outcome.result == "patched"


def test_required_fields_and_wrong_types_are_still_refused() -> None:
    with pytest.raises(InvalidInput, match=r"^request\.uid: expected str of length >= 1"):
        reviews.parse(orjson.dumps(with_null("request.uid")))
    with pytest.raises(InvalidInput, match=r"^request: object missing required field uid"):
        reviews.parse(orjson.dumps(with_null("request")))
    review = with_null("request.namespace")
    review["request"]["name"] = 7
    with pytest.raises(InvalidInput, match=r"^request\.name: expected str, got int"):
        reviews.parse(orjson.dumps(review))


class _Inner(msgspec.Struct, frozen=True):
    word: str = "default"
    count: int = 0


class _Outer(msgspec.Struct, frozen=True):
    need: str
    inner: _Inner = _Inner()
    maybe: _Inner | None = None
    words: list[str] = []
    table: dict[str, _Inner] = {}
    raw: msgspec.Raw = msgspec.Raw(b"1")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"need": None}, _Outer(need="")),
        ({"need": "x", "inner": None}, _Outer(need="x")),
        ({"need": "x", "inner": {"word": None, "count": None}}, _Outer(need="x")),
        ({"need": "x", "maybe": None}, _Outer(need="x")),
        ({"need": "x", "words": ["a", None]}, _Outer(need="x", words=["a", ""])),
        ({"need": "x", "table": {"k": None}}, _Outer(need="x", table={"k": _Inner()})),
    ],
)
def test_go_nulls_for_every_shape(body: dict[str, Any], expected: _Outer) -> None:
    decoded = validation.decode(orjson.dumps(body), validation.decoder(_Outer))
    assert msgspec.structs.asdict(decoded) == msgspec.structs.asdict(expected)


def test_a_raw_field_keeps_its_null() -> None:
    decoded = validation.decode(b'{"need": null, "raw": null}', validation.decoder(_Outer))
    assert bytes(decoded.raw) == b"null"
