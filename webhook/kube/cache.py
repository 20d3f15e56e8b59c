"""One watched cache: the objects of one resource, decoded and held in memory.

Readers call :meth:`WatchedCache.items` (synchronous, never waits on the API server): a
read-only mapping from object key (its name; ``namespace/name`` for a namespaced object)
to what the pure ``decode`` made of it, replaced as a whole on each change, so a reader
may keep it and compare identities. A keyed controller is told which keys changed
(``on_keys``) and reads one with :meth:`WatchedCache.get`. A background
:class:`~webhook.kube.watch.ListWatch` keeps it current. An object ``decode`` refuses
(:class:`~webhook.model.validation.InvalidInput`) is left out and logged once per
problem; a change that decodes to an equal value (a status heartbeat) publishes nothing.
When the API server cannot be reached the cache keeps its last state and
:attr:`~WatchedCache.synced` turns False.

The fleet inventory (Karmada Clusters), Liqo's virtual nodes and the leader's NodeOverlays
are such caches.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Generic, TypeVar

import msgspec
import orjson
import structlog
from kubernetes_asyncio import client

from webhook.kube.watch import ListWatch
from webhook.model.objects import meta_of
from webhook.model.resources import Resource
from webhook.model.validation import InvalidInput
from webhook.runtime import tasks

log = structlog.get_logger("carbonshift.cache")

T = TypeVar("T")

Decode = Callable[[Mapping[str, Any], "T | None"], T]
"""What an object means, given what the cache held for it before (to log a problem only
when it is new); raises :class:`InvalidInput` for an object to leave out."""


class _Meta(msgspec.Struct, frozen=True):
    name: str = ""
    namespace: str = ""
    annotations: dict[str, str] = {}


class Head(msgspec.Struct, frozen=True):
    """What an object's JSON says of it before it is parsed: its name, namespace and
    annotations (:data:`RawDecode`)."""

    metadata: _Meta = _Meta()

    @property
    def key(self) -> str:
        """The object's key in a cache (as :func:`key_of`)."""
        meta = self.metadata
        return f"{meta.namespace}/{meta.name}" if meta.namespace and meta.name else meta.name

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.metadata.annotations


_HEAD = msgspec.json.Decoder(Head)

RawDecode = Callable[[memoryview, Head, "T | None"], T]
"""What a listed object means, from its JSON as the API server sent it and its
:class:`Head`, given what the cache held for it before: :data:`Decode` for a cache that
keeps bytes (it then parses only what it reads)."""


def key_of(obj: Mapping[str, Any]) -> str:
    """An object's key in a cache: its name, ``namespace/name`` when namespaced."""
    meta = meta_of(obj)
    return f"{meta.namespace}/{meta.name}" if meta.namespace and meta.name else meta.name


class WatchedCache(Generic[T]):
    """The objects of one resource by name, as ``decode`` reads them."""

    def __init__(
        self,
        resource: Resource,
        decode: Decode[T],
        *,
        kind: str,
        on_change: Callable[[Mapping[str, T]], None] | None = None,
        objects: Callable[[client.ApiClient], Any] | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        on_keys: Callable[[Collection[str]], None] | None = None,
        raw: RawDecode[T] | None = None,
    ) -> None:
        """``resource``: its API coordinates; ``kind``: how logs name one object;
        ``on_change``: called with each new view (metrics); ``objects``: what lists and
        watches, given the client (default: the custom objects API, all namespaces of a
        namespaced resource); ``label_selector``, ``field_selector``: only the objects
        they match are held (listed and watched with them); ``on_keys``: called with the
        keys whose value changed (added, changed or gone) after each list and event;
        ``raw``: decodes the listed objects from their JSON, unparsed (watch events, and
        an object whose head does not read as the API's, still go through ``decode``)."""
        self.resource = resource
        self.decode = decode
        self.raw = raw
        self.kind = kind
        self.on_change = on_change
        self.on_keys = on_keys
        self.objects = objects
        self.label_selector = label_selector
        self.field_selector = field_selector
        self._held: dict[str, T] = {}
        self._skipped: dict[str, str] = {}
        self._view: Mapping[str, T] | None = MappingProxyType({})
        self._listing: tuple[dict[str, T], dict[str, str]] = ({}, {})
        self._watch: ListWatch | None = None
        self._task: asyncio.Task[None] | None = None

    def __str__(self) -> str:
        """The resource, as logs and metrics name it (``plural.group``)."""
        return self.resource.name

    # --- reading (synchronous) -----------------------------------------------------------

    def items(self) -> Mapping[str, T]:
        """Every usable object by key (a read-only snapshot; replaced on each change)."""
        if self._view is None:
            self._view = MappingProxyType(dict(self._held))
        return self._view

    def get(self, key: str) -> T | None:
        """One object by key (its name; ``namespace/name`` when namespaced)."""
        return self._held.get(key)

    def skipped(self) -> Mapping[str, str]:
        """Objects left out, by name: why."""
        return dict(self._skipped)

    @property
    def synced(self) -> bool:
        """Listed from the API server and following its watch right now."""
        return self._watch is not None and self._watch.synced

    @property
    def following(self) -> bool:
        """Started: a watch keeps it current (else only :meth:`list_once` fills it)."""
        return self._task is not None

    @property
    def served(self) -> bool:
        """False while the API server does not serve the resource (its CRD is not
        installed): synced, and empty."""
        return self._watch is None or self._watch.served

    # --- updating (called by the watch; usable on their own) ------------------------------

    def replace(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """A full list: anything not listed is gone."""
        self.begin()
        self.page(objects)
        self.finish()

    def begin(self) -> None:
        """A list begins (its pages follow, then :meth:`finish`)."""
        self._listing = (self._held, self._skipped)
        self._held, self._skipped = {}, {}

    def page(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """One page of a list."""
        before, known = self._listing
        for obj in objects:
            self._take(obj, before, known)

    def finish(self) -> None:
        """The list is complete: anything it did not name is gone."""
        before, _ = self._listing
        self._listing = ({}, {})
        held = self._held
        changed = {k for k in before.keys() | held.keys() if before.get(k) != held.get(k)}
        self._publish(changed)

    def event(self, kind: str, obj: Mapping[str, Any]) -> None:
        """One watch event: ``ADDED``, ``MODIFIED`` or ``DELETED``."""
        key = key_of(obj)
        if not key:
            return
        before, problem = self._held.get(key), self._skipped.get(key)
        if kind == "DELETED":
            self._held.pop(key, None)
            self._skipped.pop(key, None)
        else:
            self._take(obj, self._held, {key: self._skipped.pop(key, "")})
        if self._held.get(key) == before and self._skipped.get(key) == problem:
            return  # e.g. a status heartbeat: what readers read is unchanged
        self._publish((key,) if self._held.get(key) != before else ())

    def page_raw(self, objects: Sequence[msgspec.Raw]) -> None:
        """One page of a list, each object its JSON as the API server sent it (with
        ``raw``)."""
        before, known = self._listing
        raw = self.raw
        assert raw is not None  # the list asks for raw pages only with a raw decoder
        for data in objects:
            view = memoryview(data)
            try:
                head = _HEAD.decode(view)
            except msgspec.ValidationError:
                self._take(orjson.loads(view), before, known)
                continue
            key = head.key
            try:
                self._held[key] = raw(view, head, before.get(key))
            except InvalidInput as exc:
                self._skip(key, exc, known)

    def _take(
        self, obj: Mapping[str, Any], before: Mapping[str, T], known: Mapping[str, str]
    ) -> None:
        key = key_of(obj)
        try:
            self._held[key] = self.decode(obj, before.get(key))
        except InvalidInput as exc:
            self._skip(key, exc, known)

    def _skip(self, key: str, exc: InvalidInput, known: Mapping[str, str]) -> None:
        self._held.pop(key, None)
        self._skipped[key] = str(exc)
        if str(exc) != known.get(key):
            log.warning(f"{self.kind}_skipped", name=key, problem=str(exc))

    def _publish(self, changed: Collection[str]) -> None:
        self._view = None
        if self.on_change is not None:
            self.on_change(self.items())
        if self.on_keys is not None and changed:
            self.on_keys(changed)

    # --- running --------------------------------------------------------------------------

    def start(self, api: client.ApiClient, *, timeout_seconds: int = 300) -> None:
        """Follow the API server in the background (until :meth:`stop`); a cache two
        controllers share is started once."""
        if self._task is not None:
            return
        self._watch = self._follow(api, timeout_seconds)
        self._task = asyncio.create_task(self._watch.run(), name=f"watch-{self.resource.plural}")

    async def list_once(self, api: client.ApiClient) -> None:
        """Fill the cache from one list, without following the API server (a one-off
        pass: the CLI, a benchmark); :attr:`synced` turns True."""
        self._watch = self._follow(api, 300)
        await self._watch.list()

    def _follow(self, api: client.ApiClient, timeout_seconds: int) -> ListWatch:
        resource = self.resource
        return ListWatch(
            api,
            resource.group,
            resource.version,
            resource.plural,
            on_list=self.replace,
            on_event=self.event,
            timeout_seconds=timeout_seconds,
            objects=self.objects(api) if self.objects is not None else None,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            paged=self,
            raw=self.page_raw if self.raw is not None else None,
        )

    async def stop(self) -> None:
        await tasks.cancel(self._task)
        self._task = None


Listener = Callable[[Resource, Collection[str]], None]
"""Told which objects of a resource changed (their keys in its cache)."""


class CacheSet:
    """Watched caches read together (what one technology's controllers read): every
    change is told to every listener (:meth:`listen`) with the resource and the keys that
    changed; the set is followed once however many controllers start it, and stopped
    with the last of them. A subclass makes its caches with :meth:`watched` and names
    them in :attr:`caches` (and, when some are optional, :attr:`needed`)."""

    caches: tuple[WatchedCache[Any], ...] = ()
    """Every cache of the set."""
    needed: tuple[WatchedCache[Any], ...] | None = None
    """The caches a decision cannot do without (None: all of them)."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._users = 0

    def watched(
        self, resource: Resource, decode: Decode[T], *, kind: str, **options: Any
    ) -> WatchedCache[T]:
        """A cache of ``resource`` whose changes the set's listeners hear
        (``options``: :class:`WatchedCache`'s)."""
        told = functools.partial(self._changed, resource)
        return WatchedCache(resource, decode, kind=kind, on_keys=told, **options)

    def listen(self, listener: Listener) -> None:
        """Call ``listener`` after every change."""
        self._listeners.append(listener)

    def _changed(self, resource: Resource, keys: Collection[str]) -> None:
        for listener in self._listeners:
            listener(resource, keys)

    @property
    def following(self) -> bool:
        """Started: watches keep the caches current."""
        return all(cache.following for cache in self.caches)

    @property
    def synced(self) -> bool:
        """Every cache a decision needs is listed and followed."""
        needed = self.caches if self.needed is None else self.needed
        return all(cache.synced for cache in needed)

    def start(self, api: client.ApiClient, *, timeout_seconds: int = 300) -> None:
        """Follow the API server (once, however many controllers start the set)."""
        self._users += 1
        if self._users == 1:
            for cache in self.caches:
                cache.start(api, timeout_seconds=timeout_seconds)

    async def stop(self) -> None:
        """Stop following once the last controller that started the set stopped."""
        self._users = max(0, self._users - 1)
        if self._users == 0:
            for cache in self.caches:
                await cache.stop()
