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
from hypothesis import given, settings
from hypothesis import strategies as st

from devtools.sandbox.layout import free_port
from tests.semantics.checker import schema_problems
from tests.serve.crd_values import FUZZ, JSON, KINDS, crd_schema, from_schema
from tests.support import FLEET

SCALE = float(os.environ.get("CARBONSHIFT_FUZZ_SCALE", "1"))
EXAMPLES = {
    "PropagationPolicy": 600,
    "ClusterPropagationPolicy": 500,
    "NodePool": 500,
    "NamespaceOffloading": 300,
}
MALFORMED = 400
ANSWER_SECONDS = 5.0
"""A hang: no answer within this (kube-apiserver gives up after timeoutSeconds, 3 s)."""

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


@pytest.mark.timeout(900)
def test_every_handled_kind_is_fuzzed() -> None:
    assert set(EXAMPLES) == set(KINDS)


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_reviews_generated_from_the_crd_schemas(server: Server, kind: str) -> None:
    schema = crd_schema(kind)

    @settings(FUZZ, max_examples=int(EXAMPLES[kind] * SCALE))
    @given(obj=from_schema(schema), operation=st.sampled_from(["CREATE", "UPDATE"]))
    def one(obj: dict[str, Any], operation: str) -> None:
        TALLY[kind] += 1
        uid = f"fuzz-{TALLY[kind]}"
        status, body = server.post(json.dumps(review(kind, obj, uid, operation)).encode())
        check_admission(uid, status, body, obj)

    one()


# malformed envelopes ------------------------------------------------------------------------


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
    (Path(__file__).resolve().parents[2] / "webhook/data/openapi.json").read_text()
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
