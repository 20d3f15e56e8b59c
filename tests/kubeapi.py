"""An in-process Kubernetes API server for unit tests (import as ``tests.kubeapi``).

It speaks the API server's wire protocol on 127.0.0.1, so the code under test talks to it
through the real ``kubernetes_asyncio`` client (``CustomObjectsApi``, ``CoreV1Api``,
``EventsV1Api``, ``CoordinationV1Api``) exactly as it talks to a cluster::

    async with kubeapi.serve() as kube:
        kube.add(testing.propagation_policy(namespace="shop"))
        await Follower(kube.api, ...).reconcile()
        [put] = kube.calls("PUT")

What it keeps: one store of objects keyed by (group, version, resource, namespace, name),
any resource under ``/api/v1`` and ``/apis/{group}/{version}``, namespaced or not. Every
write gives the object a new ``metadata.resourceVersion`` (one counter for the whole
store, as etcd's); creation sets ``uid`` and ``creationTimestamp``. The verbs:

- LIST, cluster-wide or per namespace, with ``labelSelector`` (``k=v``, ``k!=v``, ``k``,
  comma-separated), ``fieldSelector`` (``metadata.name``, ``metadata.namespace``) and
  pages (``limit``, ``continue``);
- WATCH (a LIST with ``watch=true``): from the ``resourceVersion`` asked (a list's), every
  ADDED, MODIFIED and DELETED of the resource's objects the ``labelSelector`` and
  ``fieldSelector`` match, one
  JSON line each, as they happen, until ``timeoutSeconds`` (writes by tests included);
- GET; DELETE (answers the deleted object);
- POST creates (``generateName`` honoured; 409 ``AlreadyExists``);
- PUT replaces: the body's ``resourceVersion`` must be the stored one (409 ``Conflict``
  otherwise; 422 when missing, as for custom resources); 404 when there is no object;
- PATCH: server-side apply (``application/apply-patch+yaml``; ``fieldManager`` required;
  creates a missing object, but not through a subresource), merge and strategic merge
  patch (a recursive merge, ``null`` deletes), JSON patch. Apply merges like a merge patch:
  it never removes fields a manager stopped sending (no managed fields are tracked).

Writes through a ``status`` subresource change nothing but ``status``. What a cluster has
installed and enforces is the test's to set (by default every resource is served, without
a status subresource, in namespaces that all exist):

- :attr:`KubeApi.unserved`: API groups or resources whose CRDs are not installed: every
  request on them answers 404, as for a path the API server does not know;
- :attr:`KubeApi.status_subresource`: resources with a ``status`` subresource: creating
  or writing the object itself leaves its ``status`` as stored (none on creation);
- :attr:`KubeApi.strict_namespaces`: an object is created (POST, apply) only in a
  namespace stored as a ``Namespace`` (404 otherwise), as the API server's
  NamespaceLifecycle admission does.

Errors are ``Status`` bodies with the API server's ``reason`` and ``code``. Every request
is recorded (:attr:`KubeApi.requests`, :meth:`KubeApi.calls`), and :meth:`KubeApi.before`
runs a test's hook before a request is served: to refuse it (return a status code) or to
write concurrently (:meth:`KubeApi.touch`), so the request meets a newer object.
:class:`Gate` stands in for the leader elector.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import itertools
import json
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import jsonpatch
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client

from webhook import kinds

Obj = dict[str, Any]
CREATED = "2026-01-01T00:00:00Z"
"""The ``creationTimestamp`` of every object the server creates."""
SERVER_OWNED = frozenset({"name", "namespace", "uid", "creationTimestamp"})
"""Metadata a write cannot change."""


@dataclasses.dataclass(frozen=True, slots=True)
class Where:
    """What a request path names."""

    group: str
    version: str
    resource: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def matches(self, resource: str) -> bool:
        """``resource`` is this one's plural, or ``plural.group`` (as kubectl names it)."""
        return resource in (self.resource, f"{self.resource}.{self.group}")

    @staticmethod
    def parse(path: str) -> Where | None:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not 1 <= len(rest) <= 3:
            return None
        rest += [""] * (3 - len(rest))
        return Where(group, version, rest[0], namespace, rest[1], rest[2])


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """One request as the server received it."""

    method: str
    where: Where
    query: Mapping[str, str]
    content_type: str
    body: Any
    """The decoded body (None without one)."""


Hook = Callable[[Request], int | None]
"""Runs before a request is served; a status code refuses the request with it."""


@dataclasses.dataclass
class _Before:
    method: str
    resource: str
    name: str | None
    hook: Hook
    times: int


@dataclasses.dataclass
class Gate:
    """A stand-in for the leader elector (:class:`webhook.kube.writes.Gate`): leading
    until told otherwise."""

    leading: bool = True

    def lose(self, _: Request | None = None) -> None:
        """Stop leading (also a :data:`Hook`: leadership lost as a request arrives)."""
        self.leading = False


Key = tuple[str, str, str, str, str]
"""(group, version, resource, namespace, name)"""


class KubeApi:
    """The store, the request record and the hooks; :attr:`api` once served."""

    def __init__(self) -> None:
        self.objects: dict[Key, Obj] = {}
        self.requests: list[Request] = []
        self._hooks: list[_Before] = []
        self.unserved: set[str] = set()
        """API groups, or resources as in :meth:`Where.matches`, not served (404)."""
        self.status_subresource: set[str] = set()
        """Resources (as in :meth:`Where.matches`) whose ``status`` only the ``status``
        subresource writes."""
        self.strict_namespaces = False
        """Objects are created only in namespaces stored as ``Namespace`` objects."""
        self._versions = itertools.count(1)
        self._names = itertools.count(1)
        self._events: list[tuple[int, Key, str, Obj]] = []
        """(resourceVersion, key, type, object) of every change, for watches."""
        self._changed = asyncio.Event()
        self._closing = False
        self.api: client.ApiClient = client.ApiClient(client.Configuration())
        """The client connected to this server (inside :func:`serve`)."""

    # --- what tests do ---------------------------------------------------------------------

    def add(self, obj: Mapping[str, Any], resource: str | None = None) -> Obj:
        """Store ``obj`` as created (``resource``: its plural, by default the kind
        registry's, else the lower-case kind plus ``s``); returns the stored copy."""
        group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
        kind = str(obj.get("kind", ""))
        if resource is None:
            row = kinds.find(group, kind)
            resource = row.resource if row is not None else kind.lower() + "s"
        meta = obj.get("metadata") or {}
        where = Where(group, version, resource, str(meta.get("namespace") or ""))
        return self._create(where, copy.deepcopy(dict(obj)))

    def get(self, resource: str, name: str, namespace: str = "") -> Obj:
        """A copy of the stored object (``resource`` as in :meth:`Where.matches`)."""
        return copy.deepcopy(self.objects[self._locate(resource, name, namespace)])

    def items(self, resource: str, namespace: str | None = None) -> list[Obj]:
        """Copies of the stored objects of ``resource`` (in one namespace when given)."""
        return [
            copy.deepcopy(obj)
            for (group, version, plural, ns, _), obj in sorted(self.objects.items())
            if Where(group, version, plural).matches(resource) and namespace in (None, ns)
        ]

    def touch(
        self,
        resource: str,
        name: str,
        namespace: str = "",
        change: Callable[[Obj], object] = lambda _: None,
    ) -> Obj:
        """Someone else's write: ``change`` the stored object in place, bump its version."""
        key = self._locate(resource, name, namespace)
        change(self.objects[key])
        self.objects[key]["metadata"]["resourceVersion"] = str(next(self._versions))
        self._record(key, "MODIFIED", self.objects[key])
        return copy.deepcopy(self.objects[key])

    def remove(self, resource: str, name: str, namespace: str = "") -> None:
        """Someone else deleted the object."""
        self._delete(self._locate(resource, name, namespace))

    def before(
        self, method: str, resource: str, hook: Hook, *, name: str | None = None, times: int = 1
    ) -> None:
        """Run ``hook`` before the next ``times`` ``method`` requests on ``resource``
        (optionally only the object ``name``)."""
        self._hooks.append(_Before(method, resource, name, hook, times))

    def fail(self, method: str, resource: str, status: int, *, times: int = 1) -> None:
        """Refuse the next ``times`` ``method`` requests on ``resource`` with ``status``."""
        self.before(method, resource, lambda _: status, times=times)

    def calls(self, method: str | None = None, resource: str | None = None) -> list[Request]:
        """The recorded requests, by method and resource when given."""
        return [
            r
            for r in self.requests
            if method in (None, r.method) and (resource is None or r.where.matches(resource))
        ]

    def writes(self) -> list[Request]:
        """Every recorded request that writes."""
        return [r for r in self.requests if r.method in ("POST", "PUT", "PATCH", "DELETE")]

    # --- serving ---------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        where = Where.parse(request.path)
        if where is None:
            return _status(404, "NotFound", f"the server could not find {request.path}")
        raw = await request.read()
        seen = Request(
            request.method, where, dict(request.query), request.content_type, _decode(raw)
        )
        self.requests.append(seen)
        if any(where.group == name or where.matches(name) for name in self.unserved):
            return _status(404, "NotFound", "the server could not find the requested resource")
        for pending in list(self._hooks):
            if pending.method == request.method and where.matches(pending.resource):
                if pending.name not in (None, where.name):
                    continue
                pending.times -= 1
                if pending.times <= 0:
                    self._hooks.remove(pending)
                refused = pending.hook(seen)
                if refused is not None:
                    return _status(refused, "Injected", f"{request.method} refused by the test")
        if (
            request.method == "GET"
            and not where.name
            and seen.query.get("watch", "").lower() == "true"
        ):
            return await self._watch(request, where, seen.query)
        return self._serve(seen)

    async def _watch(
        self, request: web.Request, where: Where, query: Mapping[str, str]
    ) -> web.StreamResponse:
        label_match = _selector(query.get("labelSelector", ""))
        field_match = _selector(query.get("fieldSelector", ""))

        def labels(metadata: Mapping[str, Any]) -> bool:
            fields = {f"metadata.{k}": str(v) for k, v in metadata.items()}
            return label_match(metadata.get("labels") or {}) and field_match(fields)

        since = int(query.get("resourceVersion") or 0)
        until = asyncio.get_running_loop().time() + float(query.get("timeoutSeconds") or 30)
        response = web.StreamResponse()
        await response.prepare(request)
        with contextlib.suppress(ConnectionResetError):
            await self._stream(
                request, response=response, where=where, labels=labels, since=since, until=until
            )
        return response

    async def _stream(
        self,
        request: web.Request,
        *,
        response: web.StreamResponse,
        where: Where,
        labels: Callable[[Mapping[str, Any]], bool],
        since: int,
        until: float,
    ) -> None:
        loop = asyncio.get_running_loop()
        while True:
            changed = self._changed
            for version, key, kind, obj in self._events:
                if version <= since:
                    continue
                since = version
                group, api_version, plural, namespace, _ = key
                if (group, api_version, plural) != (where.group, where.version, where.resource):
                    continue
                if where.namespace not in ("", namespace):
                    continue
                if labels(obj["metadata"]):
                    line = json.dumps({"type": kind, "object": obj}).encode() + b"\n"
                    await response.write(line)
            left = until - loop.time()
            gone = request.transport is None or request.transport.is_closing()
            if left <= 0 or gone or self._closing:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), left)
        await response.write_eof()

    def close(self) -> None:
        """End every watch (the server stops)."""
        self._closing = True
        self._changed.set()

    def _record(self, key: Key, kind: str, obj: Obj) -> None:
        """A change, for the watches (``obj`` at its new ``resourceVersion``)."""
        version = int(obj["metadata"]["resourceVersion"])
        self._events.append((version, key, kind, copy.deepcopy(obj)))
        self._changed.set()
        self._changed = asyncio.Event()

    def _delete(self, key: Key) -> Obj:
        gone = self.objects.pop(key)
        last = copy.deepcopy(gone)
        last["metadata"]["resourceVersion"] = str(next(self._versions))
        self._record(key, "DELETED", last)
        return gone

    def _serve(self, seen: Request) -> web.Response:
        where, method = seen.where, seen.method
        if not where.name:
            if method == "GET":
                return _json(self._list(where, seen.query))
            if method == "POST":
                if not isinstance(seen.body, dict):
                    return _status(400, "BadRequest", "the body is not an object")
                if self._find(where, _name_of(seen.body)) is not None:
                    return _status(409, "AlreadyExists", f"{_name_of(seen.body)} already exists")
                return self._created(where, copy.deepcopy(seen.body))
            return _status(405, "MethodNotAllowed", f"{method} on a collection")
        stored = self._find(where, where.name)
        apply = method == "PATCH" and "apply-patch" in seen.content_type
        if apply and not seen.query.get("fieldManager"):
            return _status(422, "Invalid", "fieldManager is required for apply patch")
        if apply and stored is None and not where.subresource:
            body = copy.deepcopy(seen.body)
            body.setdefault("metadata", {})["name"] = where.name
            return self._created(where, body)
        if stored is None:
            return _status(404, "NotFound", f'{where.resource} "{where.name}" not found')
        if method == "GET":
            return _json(stored)
        if method == "DELETE":
            self._delete(self._key(where, where.name))
            return _json(stored)
        if method == "PUT":
            if not isinstance(seen.body, dict):
                return _status(400, "BadRequest", "the body is not an object")
            wanted = str((seen.body.get("metadata") or {}).get("resourceVersion") or "")
            if not wanted:
                return _status(422, "Invalid", "metadata.resourceVersion must be specified")
            if wanted != stored["metadata"]["resourceVersion"]:
                return _status(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {where.resource} "{where.name}": the '
                    "object has been modified; please apply your changes to the latest "
                    "version and try again",
                )
            return _json(self._write(where, stored, copy.deepcopy(seen.body)))
        if method == "PATCH":
            if isinstance(seen.body, list):
                changed = jsonpatch.apply_patch(stored, seen.body)
            else:
                changed = _merged(stored, seen.body)
            return _json(self._write(where, stored, changed))
        return _status(405, "MethodNotAllowed", method)

    def _list(self, where: Where, query: Mapping[str, str]) -> Obj:
        labels = _selector(query.get("labelSelector", ""))
        fields = _selector(query.get("fieldSelector", ""))
        items = [
            copy.deepcopy(obj)
            for (group, version, plural, ns, _), obj in sorted(self.objects.items())
            if (group, version, plural) == (where.group, where.version, where.resource)
            and where.namespace in ("", ns)
            and labels(obj["metadata"].get("labels") or {})
            and fields({f"metadata.{k}": str(v) for k, v in obj["metadata"].items()})
        ]
        start, limit = int(query.get("continue") or 0), int(query.get("limit") or 0)
        end = start + limit if limit else len(items)
        meta = {"resourceVersion": str(next(self._versions))}
        if end < len(items):
            meta["continue"] = str(end)
        return {"apiVersion": where.api_version, "kind": "List", "metadata": meta,
                "items": items[start:end]}  # fmt: skip

    def _create(self, where: Where, obj: Obj) -> Obj:
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            meta["name"] = f"{meta.get('generateName', 'object-')}{next(self._names):05d}"
        if where.namespace:
            meta["namespace"] = where.namespace
        meta["uid"] = str(uuid.UUID(int=next(self._names)))
        meta["creationTimestamp"] = meta.get("creationTimestamp") or CREATED
        meta["resourceVersion"] = str(next(self._versions))
        self.objects[self._key(where, meta["name"])] = obj
        self._record(self._key(where, meta["name"]), "ADDED", obj)
        return copy.deepcopy(obj)

    def _write(self, where: Where, stored: Obj, obj: Obj) -> Obj:
        """Store ``obj`` over ``stored``; the server's own metadata stays as it was (the
        ``status`` subresource changes nothing but ``status``)."""
        if where.subresource == "status":
            obj = {**stored, "status": obj.get("status")}
        elif self._has_status(where):
            obj.pop("status", None)
            if "status" in stored:
                obj["status"] = stored["status"]
        kept = {k: v for k, v in stored["metadata"].items() if k in SERVER_OWNED}
        obj["metadata"] = {**(obj.get("metadata") or {}), **kept}
        obj["metadata"]["resourceVersion"] = str(next(self._versions))
        self.objects[self._key(where, where.name)] = obj
        self._record(self._key(where, where.name), "MODIFIED", obj)
        return copy.deepcopy(obj)

    def _created(self, where: Where, obj: Obj) -> web.Response:
        """A client's create: 404 in a namespace that does not exist (with
        :attr:`strict_namespaces`), a ``status`` its subresource owns is dropped."""
        namespace = ("", "v1", "namespaces", "", where.namespace)
        if self.strict_namespaces and where.namespace and namespace not in self.objects:
            return _status(404, "NotFound", f'namespaces "{where.namespace}" not found')
        if self._has_status(where):
            obj.pop("status", None)
        return _json(self._create(where, obj), 201)

    def _has_status(self, where: Where) -> bool:
        return any(where.matches(name) for name in self.status_subresource)

    def _key(self, where: Where, name: str) -> Key:
        return (where.group, where.version, where.resource, where.namespace, name)

    def _find(self, where: Where, name: str) -> Obj | None:
        found = self.objects.get(self._key(where, name))
        return copy.deepcopy(found) if found is not None else None

    def _locate(self, resource: str, name: str, namespace: str) -> Key:
        for key in self.objects:
            group, version, plural, ns, found = key
            if (ns, found) == (namespace, name) and Where(group, version, plural).matches(resource):
                return key
        raise KeyError(f"{resource} {namespace}/{name}")


@contextlib.asynccontextmanager
async def serve() -> AsyncIterator[KubeApi]:
    """A running :class:`KubeApi` with its :attr:`~KubeApi.api` client connected."""
    kube = KubeApi()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", kube.handle)
    async with TestServer(app, host="127.0.0.1", port=0) as http:
        await kube.api.close()
        kube.api = client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{http.port}"))
        try:
            yield kube
        finally:
            kube.close()
            await kube.api.close()


# --- wire parts ------------------------------------------------------------------------------


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return yaml.safe_load(raw)  # an apply patch may be YAML


def _json(body: Obj, status: int = 200) -> web.Response:
    return web.json_response(body, status=status)


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return web.json_response(body, status=code)


def _name_of(body: Obj) -> str:
    return str((body.get("metadata") or {}).get("name") or "")


def _merged(base: Any, patch: Any) -> Any:
    """RFC 7386 merge patch: objects merge recursively, ``null`` deletes, the rest replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(base) if isinstance(base, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merged(out.get(key), value)
    return out


def _selector(text: str) -> Callable[[Mapping[str, str]], bool]:
    """A label or field selector of ``k=v``, ``k==v``, ``k!=v`` and ``k`` terms, all required."""
    terms: list[tuple[str, str, str | None]] = []  # (key, operator, value)
    for term in filter(None, (t.strip() for t in text.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            terms.append((key, "!=", value))
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            terms.append((key, "=", value))
        else:
            terms.append((term, "exists", None))

    def holds(found: Mapping[str, str]) -> bool:
        for key, operator, value in terms:
            if operator == "exists" and key not in found:
                return False
            if operator == "=" and found.get(key) != value:
                return False
            if operator == "!=" and found.get(key) == value:
                return False
        return True

    return holds
