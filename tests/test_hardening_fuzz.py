"""Fuzzing a real ``carbonshift serve`` over TLS with admission reviews generated from the
real CRD schemas (from the pinned Go modules, fetched by ``make crds``; :func:`from_schema`
turns each ``openAPIV3Schema`` into a Hypothesis strategy) and with malformed envelopes.

Every answer must be a valid AdmissionReview for the request's uid (allowed; a patch, if
any, that applies and leaves the object valid against its CRD schema) or a 4xx with a
JSON ``{"error": ...}``; never a 5xx, a hang or a crash. The bounded run (about 2,000
examples, part of ``make test``) scales with ``CARBONSHIFT_FUZZ_SCALE`` (``make fuzz``: 5,
about 10,000 examples); the counts and the time are printed at the end.
"""

from __future__ import annotations

import base64
import copy
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch  # type: ignore[import-untyped]
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devtools.sandbox.layout import free_port
from tests.semantics.checker import crd_file, schema_problems
from tests.support import FLEET

SCALE = float(os.environ.get("CARBONSHIFT_FUZZ_SCALE", "1"))
EXAMPLES = {"PropagationPolicy": 600, "ClusterPropagationPolicy": 500, "NodePool": 500}
MALFORMED = 400
ANSWER_SECONDS = 5.0
"""A hang: no answer within this (kube-apiserver gives up after timeoutSeconds, 3 s)."""

KINDS = {
    "PropagationPolicy": ("policy.karmada.io", "v1alpha1", "propagationpolicies", "shop"),
    "ClusterPropagationPolicy": ("policy.karmada.io", "v1alpha1", "clusterpropagationpolicies", ""),
    "NodePool": ("karpenter.sh", "v1", "nodepools", ""),
}
TALLY: Counter[str] = Counter()


# --- the server ----------------------------------------------------------------------------


class Server:
    """``carbonshift serve`` as a child process and one keep-alive HTTPS connection to it."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        (directory / "config.yaml").write_text(json.dumps(FLEET))
        self.log = directory / "serve.log"
        command = [str(Path(sys.executable).with_name("carbonshift")), "serve",
                   f"--config={directory / 'config.yaml'}", "--host=127.0.0.1",
                   f"--port={self.port}", f"--cert-dir={directory / 'certs'}",
                   "--log-level=warning"]  # fmt: skip
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, self.log.read_text()
                time.sleep(0.05)
        self.context = ssl.create_default_context(cafile=str(directory / "certs" / "ca.crt"))
        self.conn = self._connect()

    def _connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self.context, timeout=ANSWER_SECONDS
        )

    def post(self, body: bytes, path: str = "/mutate") -> tuple[int, bytes]:
        """POST; the status and body (a new connection if the server closed it)."""
        for attempt in (0, 1):
            try:
                headers = {"Content-Type": "application/json"}
                self.conn.request("POST", path, body=body, headers=headers)
                resp = self.conn.getresponse()
                return resp.status, resp.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                self.conn = self._connect()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def stop(self) -> int:
        self.conn.close()
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = time.monotonic()
    running = Server(tmp_path_factory.mktemp("fuzz"))
    try:
        yield running
        assert running.proc.poll() is None, "the server died:\n" + running.log.read_text()[-3000:]
    finally:
        code = running.stop()
        seconds = time.monotonic() - started
        print(f"\nfuzz: {dict(sorted(TALLY.items()))} in {seconds:.1f} s; server exit {code}")
    assert code == 0


# --- generation ----------------------------------------------------------------------------


INT32 = 2**31 - 1
MAX_ITEMS = 3
"""Longest generated list or map (the schemas' own limits are often far larger)."""


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid against a structural CRD schema (OpenAPI v3 as Kubernetes uses it:
    types, properties, required, additionalProperties, items, enum, anyOf, bounds,
    patterns, ``x-kubernetes-int-or-string``, ``x-kubernetes-preserve-unknown-fields``).
    CEL rules (``x-kubernetes-validations``) are not followed: the API server checks them,
    carbonshift must still answer."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    if "anyOf" in schema:
        rest = {k: v for k, v in schema.items() if k != "anyOf"}
        return st.one_of([from_schema({**rest, **choice}) for choice in schema["anyOf"]])
    if schema.get("x-kubernetes-int-or-string"):
        return st.integers(0, 1000) | st.from_regex(r"\A[0-9]{1,2}%\Z")
    kind = schema.get("type")
    if kind == "object":
        return _object(schema)
    if kind == "array":
        items = from_schema(schema.get("items", {}))
        low = schema.get("minItems", 0)
        return st.lists(
            items,
            min_size=low,
            max_size=max(low, min(schema.get("maxItems", MAX_ITEMS), MAX_ITEMS)),
        )
    if kind == "string":
        low, high = schema.get("minLength", 0), min(schema.get("maxLength", 40), 40)
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True).filter(
                lambda v: low <= len(v) <= schema.get("maxLength", 10**9)
            )
        return st.text(min_size=low, max_size=max(low, high))
    if kind == "integer":
        return st.integers(schema.get("minimum", -INT32), schema.get("maximum", INT32))
    if kind == "number":
        return st.floats(schema.get("minimum", -1e9), schema.get("maximum", 1e9))
    if kind == "boolean":
        return st.booleans()
    return JSON  # no type: x-kubernetes-preserve-unknown-fields, anything goes


def _object(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    if not properties:
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            keys = st.from_regex(r"\A[a-z][a-z0-9.-]{0,15}\Z")
            return st.dictionaries(keys, from_schema(extra), max_size=MAX_ITEMS)
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return st.dictionaries(st.text(max_size=8), JSON, max_size=MAX_ITEMS)
        return st.just({})
    return st.fixed_dictionaries(
        {k: from_schema(v) for k, v in properties.items() if k in required},
        optional={k: from_schema(v) for k, v in properties.items() if k not in required},
    )


def _schema(kind: str) -> dict[str, Any]:
    group, version, _, _ = KINDS[kind]
    crd = yaml.safe_load(crd_file(kind).read_text())
    (found,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema: dict[str, Any] = copy.deepcopy(found["schema"]["openAPIV3Schema"])
    properties = schema["properties"]
    properties["apiVersion"] = {"const": f"{group}/{version}"}
    properties["kind"] = {"const": kind}
    properties.pop("status", None)  # the status subresource: not sent on a CREATE
    properties["metadata"] = {
        "type": "object",
        "properties": {
            "name": {"const": "fuzzed"},
            "labels": {  # opted in, mostly (cluster-scoped kinds opt in by this label)
                "type": "object",
                "properties": {"carbonshift.io/enabled": {"enum": ["true", "true", "false"]}},
                "required": ["carbonshift.io/enabled"],
                "additionalProperties": False,
            },
            "annotations": {
                "type": "object",
                "properties": {
                    key: {"type": "string", "maxLength": 12}
                    for key in (
                        "carbonshift.io/strategy",
                        "carbonshift.io/max-intensity",
                        "carbonshift.io/max-clusters",
                        "carbonshift.io/override",
                    )
                },
                "additionalProperties": False,
            },
        },
        "required": ["name", "labels"],
        "additionalProperties": False,
    }
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
    return schema


def review(kind: str, obj: dict[str, Any], uid: str, operation: str) -> dict[str, Any]:
    group, version, resource, namespace = KINDS[kind]
    if namespace:
        obj = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
    request = {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "namespace": namespace,
        "name": obj["metadata"]["name"],
        "operation": operation,
        "userInfo": {"username": "fuzz"},
        "object": obj,
        "oldObject": obj if operation == "UPDATE" else None,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def check_admission(uid: str, status: int, body: bytes, obj: dict[str, Any] | None) -> None:
    """A valid AdmissionReview answer for ``uid`` whose patch keeps ``obj`` schema-valid."""
    assert status == 200, (status, body[:300])
    answer = json.loads(body)
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == uid
    assert response["allowed"] is True
    assert all(isinstance(w, str) for w in response.get("warnings", []))
    if "patch" not in response:
        TALLY["unchanged"] += 1
        return
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert isinstance(patch, list)
    TALLY["patched"] += 1
    if obj is not None:
        patched = jsonpatch.apply_patch(copy.deepcopy(obj), patch)
        new = schema_problems(patched) - schema_problems(obj)
        assert not new, new


def check_error(status: int, body: bytes) -> None:
    """A 4xx with a JSON error naming the problem, or a valid answer (the envelope may
    have been acceptable after all)."""
    assert status < 500, (status, body[:300])
    if status == 200:
        assert json.loads(body)["response"]["allowed"] is True
        TALLY["malformed answered"] += 1
        return
    assert 400 <= status < 500
    error = json.loads(body)["error"]
    assert isinstance(error, str)
    assert error
    TALLY[f"malformed {status}"] += 1


FUZZ = settings(
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_reviews_generated_from_the_crd_schemas(server: Server, kind: str) -> None:
    schema = _schema(kind)

    @settings(FUZZ, max_examples=int(EXAMPLES[kind] * SCALE))
    @given(obj=from_schema(schema), operation=st.sampled_from(["CREATE", "UPDATE"]))
    def one(obj: dict[str, Any], operation: str) -> None:
        TALLY[kind] += 1
        uid = f"fuzz-{TALLY[kind]}"
        status, body = server.post(json.dumps(review(kind, obj, uid, operation)).encode())
        check_admission(uid, status, body, obj)

    one()


# malformed envelopes ------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _deep(depth: int) -> bytes:
    return b'{"request": ' + b"[" * depth + b"]" * depth + b"}"


def _mangled(base: dict[str, Any], path: list[str], value: Any) -> bytes:
    doc = copy.deepcopy(base)
    node = doc
    for key in path[:-1]:
        node = node[key]
    if value is _MISSING:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    return json.dumps(doc).encode()


_MISSING = object()
_BASE = review("PropagationPolicy", {"apiVersion": "policy.karmada.io/v1alpha1",
    "kind": "PropagationPolicy", "metadata": {"name": "fuzzed"},
    "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}]}},
    "base", "CREATE")  # fmt: skip
_PATHS = [
    ["request"], ["request", "uid"], ["request", "kind"], ["request", "kind", "kind"],
    ["request", "object"], ["request", "object", "spec"], ["request", "object", "metadata"],
    ["request", "object", "metadata", "annotations"], ["request", "operation"],
    ["request", "oldObject"], ["apiVersion"], ["kind"],
]  # fmt: skip

MALFORMED_BODIES = st.one_of(
    st.binary(max_size=200),  # anything, invalid UTF-8 included
    JSON.map(lambda v: json.dumps(v).encode()),
    st.builds(_mangled, st.just(_BASE), st.sampled_from(_PATHS), JSON | st.just(_MISSING)),
    st.integers(min_value=1, max_value=100_000).map(_deep),  # deep nesting
    st.integers(min_value=1, max_value=4 * 1024 * 1024).map(  # huge strings
        lambda n: _mangled(_BASE, ["request", "object", "metadata", "name"], "x" * n)
    ),
    st.just(b'{"request": {"uid": "a", "uid": "b"}, "request": {}}'),  # duplicate keys
    st.just(json.dumps(_BASE).encode().replace(b'"fuzzed"', b'"\xff\xfe"')),  # bad UTF-8
)


@pytest.mark.timeout(900)
def test_malformed_envelopes_get_a_4xx_json_error_never_a_5xx(server: Server) -> None:
    @settings(FUZZ, max_examples=int(MALFORMED * SCALE))
    @given(body=MALFORMED_BODIES)
    def one(body: bytes) -> None:
        status, answer = server.post(body)
        check_error(status, answer)

    one()


# the scheduler API ----------------------------------------------------------------------------

OPENAPI = json.loads(
    (Path(__file__).resolve().parents[1] / "webhook/data/openapi.json").read_text()
)
SCHEDULER = {
    "/v1/karmada/filter": "KarmadaRequest",
    "/v1/karmada/score": "KarmadaRequest",
    "/v1/extender/filter": "ExtenderArgs",
    "/v1/extender/prioritize": "ExtenderArgs",
}
SCHEDULER_EXAMPLES = 100


def _inline(node: Any) -> Any:
    """The OpenAPI schema with every ``$ref`` replaced by the component it names."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            return _inline(OPENAPI["components"]["schemas"][ref.rpartition("/")[2]])
        return {k: _inline(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v) for v in node]
    return node


def check_scheduler(path: str, status: int, body: bytes) -> None:
    """200 with a JSON answer of the endpoint's kind, or a 4xx JSON error; never a 5xx."""
    assert status < 500, (path, status, body[:300])
    answer = json.loads(body)
    if status == 200:  # HostPriorityList is a list, the other answers objects
        assert isinstance(answer, list if path.endswith("prioritize") else dict)
        TALLY[f"{path} 200"] += 1
        return
    assert 400 <= status < 500
    assert isinstance(answer["error"], str)
    assert answer["error"]
    TALLY[f"{path} {status}"] += 1


@pytest.mark.timeout(900)
@pytest.mark.parametrize("path", sorted(SCHEDULER))
def test_scheduler_requests_valid_and_malformed_never_get_a_5xx(server: Server, path: str) -> None:
    valid = from_schema(_inline(OPENAPI["components"]["schemas"][SCHEDULER[path]]))
    bodies = valid.map(lambda v: json.dumps(v).encode()) | MALFORMED_BODIES

    @settings(FUZZ, max_examples=int(SCHEDULER_EXAMPLES * SCALE))
    @given(body=bodies)
    def one(body: bytes) -> None:
        status, answer = server.post(body, path)
        check_scheduler(path, status, answer)

    one()
