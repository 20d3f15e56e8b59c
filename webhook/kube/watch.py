"""List, then watch, one cluster-scoped custom resource (optionally only the objects a
label selector matches, for the list and the watch alike), for as long as the process runs.

The loop lists (keeping the list's ``resourceVersion``), watches from there with
``allowWatchBookmarks`` (bookmarks only move the version on), re-watches when the server
ends the stream, re-lists at once on ``410 Gone``, and after any other error waits a
jittered exponential backoff and re-lists: one warning per outage (which ends when a watch
delivers events or ends normally), every failure counted. A resource the API server does
not serve at all (its CRD is not installed: the list answers 404) counts as listed and
empty (:attr:`ListWatch.served` turns False), is logged once at info, and is listed again
every :attr:`ListWatch.absent_seconds`.
A watch that goes quiet for longer than the server-side timeout is abandoned and re-watched
(kubernetes-asyncio #360: streams can hang without an error).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import msgspec
import structlog
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.rest import ApiException

from webhook.kube import client as kube_client
from webhook.kube.client import REQUEST_TIMEOUT, Backoff, Outage, absent, body
from webhook.model.objects import items, meta_of, text
from webhook.runtime import metrics

log = structlog.get_logger("carbonshift.kube.watch")

OnList = Callable[[Sequence[Mapping[str, Any]]], None]
"""Called with every object after a (re-)list: the whole truth, replacing what was held."""
OnEvent = Callable[[str, Mapping[str, Any]], None]
"""Called with ``ADDED``, ``MODIFIED`` or ``DELETED`` and the object."""


class Paged(Protocol):
    """A receiver of a list a page at a time (:data:`~webhook.kube.client.LIST_PAGE`
    objects), so that nobody holds every object of a large list as the API server sent it."""

    def begin(self) -> None: ...
    def page(self, objects: Sequence[Mapping[str, Any]]) -> None: ...
    def finish(self) -> None: ...


OnRawPage = Callable[[Sequence[msgspec.Raw]], None]
"""Called with one page of a list as the API server sent its objects: each one's JSON,
unparsed (a receiver that keeps bytes parses only what it reads)."""


class _Continued(msgspec.Struct, frozen=True):
    resourceVersion: str = ""  # noqa: N815 - the API's field name
    token: str = msgspec.field(name="continue", default="")


class _Page(msgspec.Struct, frozen=True):
    items: list[msgspec.Raw] = []
    metadata: _Continued = _Continued()


_PAGE = msgspec.json.Decoder(_Page)
"""A list answer split into its objects' JSON, without parsing them."""


class CoreObjects:
    """A core (``v1``) resource listed and watched through ``ListWatch``'s custom-object
    call: ``CoreObjects.of("list_namespace")`` is the ``objects`` factory for Namespaces."""

    def __init__(self, api: client.ApiClient, lister: str) -> None:
        self.api = api
        self.list = getattr(client.CoreV1Api(api), lister)

    @classmethod
    def of(cls, lister: str) -> Callable[[client.ApiClient], CoreObjects]:
        return lambda api: cls(api, lister)

    async def list_cluster_custom_object(self, *_resource: str, **options: Any) -> Any:
        answer = await self.list(**options)
        if options.get("watch"):
            return answer  # the raw stream the watch reads
        return self.api.sanitize_for_serialization(answer)


def _cancelled(exc: BaseException) -> None:
    """Raise CancelledError when the running task is being cancelled: a stream's
    cleanup can raise its own error in place of the cancellation (kubernetes-asyncio's
    ``Watch`` closes its client on the way out), which must not read as a failed watch to
    retry, or :meth:`ListWatch.run` would outlive its cancellation."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError from exc


class ListWatch:
    """List+watch of ``<plural>.<group>/<version>`` (cluster-scoped custom objects)."""

    def __init__(
        self,
        api: client.ApiClient,
        group: str,
        version: str,
        plural: str,
        *,
        on_list: OnList,
        on_event: OnEvent,
        timeout_seconds: int = 300,
        backoff: Backoff | None = None,
        objects: Any = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        paged: Paged | None = None,
        raw: OnRawPage | None = None,
    ) -> None:
        """``objects``: what lists and watches (default: the API server's custom objects,
        every namespace of a namespaced resource; anything with
        ``CustomObjectsApi.list_cluster_custom_object``'s signature); ``label_selector``,
        ``field_selector``: only the objects they match are listed and watched; ``paged``:
        list a page at a time into it (instead of ``on_list``); ``raw``: with ``paged``,
        the pages' objects as the API server sent them, unparsed, in place of
        ``paged.page`` (the list asked with ``_preload_content=False``; an ``objects``
        that answers plain data anyway is read as parsed)."""
        self.objects = objects or client.CustomObjectsApi(api)
        self.group, self.version, self.plural = group, version, plural
        self.resource = f"{plural}.{group}"
        self.selector: dict[str, Any] = {
            option: value
            for option, value in (
                ("label_selector", label_selector),
                ("field_selector", field_selector),
            )
            if value is not None
        }
        self.on_list = on_list
        self.on_event = on_event
        self.paged = paged
        self.raw = raw
        self.timeout_seconds = timeout_seconds
        self.backoff = backoff or Backoff()
        self.outage = Outage(self.resource, "watch")
        self.synced = False
        """True once listed, until a call fails (then again after the next list)."""
        self.served = True
        """False while the API server answers that it does not serve the resource (its CRD
        is not installed)."""
        self.resource_version: str | None = None
        self.absent_seconds = 60.0
        """How often a resource the API server does not serve is listed again."""

    async def list(self) -> None:
        """List once (what :meth:`run` does first): a resource the API server does not
        serve is listed as empty; any other error is raised."""
        try:
            await self._list()
        except ApiException as exc:
            if not absent(exc, self.resource):
                raise
            self.on_list([])
            self.synced, self.served = True, False

    async def _list(self) -> None:
        metrics.KUBE_RELISTS.labels(self.resource).inc()
        if self.paged is None:
            listed = await self.objects.list_cluster_custom_object(
                self.group,
                self.version,
                self.plural,
                _request_timeout=REQUEST_TIMEOUT,
                **self.selector,
            )
            self.on_list(items(listed, "items"))
            version = listed["metadata"]["resourceVersion"]
        else:
            version = await self._pages(self.paged)
        self.resource_version = version
        self.served = self.synced = True

    async def _pages(self, paged: Paged) -> str:
        """List a page at a time into ``paged``; the list's resourceVersion (every page
        of one list is read at the first one's)."""
        token, version = "", ""
        paged.begin()
        while True:
            paging: dict[str, Any] = {"limit": kube_client.LIST_PAGE} | (
                {"_continue": token} if token else {}
            )
            if self.raw is not None:
                paging["_preload_content"] = False
            listed = await self.objects.list_cluster_custom_object(
                self.group,
                self.version,
                self.plural,
                _request_timeout=REQUEST_TIMEOUT,
                **self.selector,
                **paging,
            )
            if self.raw is not None and not isinstance(listed, Mapping):
                page = _PAGE.decode(await body(listed))
                self.raw(page.items)
                version, token = version or page.metadata.resourceVersion, page.metadata.token
            else:  # parsed (a stand-in for the API that answers plain data)
                paged.page(items(listed, "items"))
                version = version or str(listed["metadata"]["resourceVersion"])
                token = text(listed, "metadata", "continue")
            if not token:
                break
        paged.finish()
        return version

    async def _watch(self) -> None:
        deadline = asyncio.timeout(self.timeout_seconds + 30)
        try:
            async with deadline, watch.Watch() as stream:
                async for event in stream.stream(
                    self.objects.list_cluster_custom_object,
                    self.group,
                    self.version,
                    self.plural,
                    resource_version=self.resource_version,
                    allow_watch_bookmarks=True,
                    timeout_seconds=self.timeout_seconds,
                    _request_timeout=(REQUEST_TIMEOUT[0], self.timeout_seconds + 20),
                    **self.selector,
                ):
                    self._working()
                    kind = event["type"]
                    raw = event["raw_object"]
                    version = meta_of(raw).resource_version
                    if version:
                        self.resource_version = version
                    if kind in ("ADDED", "MODIFIED", "DELETED"):
                        self.on_event(kind, raw)
        except TimeoutError:
            if not deadline.expired():
                raise
            log.info("watch_quiet_restarted", resource=self.resource)
        self._working()  # the server ended the stream: a normal end

    def _working(self) -> None:
        """The watch works: the outage (if any) is over."""
        if self.outage.failures:
            self.outage.recovered()
            self.backoff.reset()

    async def run(self) -> None:
        """Follow the resource until cancelled; never raises otherwise."""
        while True:
            verb = "list"
            try:
                if self.resource_version is None:
                    await self._list()
                verb = "watch"
                await self._watch()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                _cancelled(exc)
                if not isinstance(exc, ApiException):
                    self._failed(exc, verb)
                    await self.backoff.sleep()
                    continue
                if exc.status == 410:
                    log.info("watch_expired_relisting", resource=self.resource)
                    self.resource_version = None
                    continue
                if verb == "list" and absent(exc, self.resource):
                    self.on_list([])  # not served: none of it, which is a synced answer
                    self.synced, self.served = True, False
                    self._working()
                    await asyncio.sleep(self.absent_seconds)
                    continue
                self._failed(exc, verb)
                await self.backoff.sleep()

    def _failed(self, exc: BaseException, verb: str) -> None:
        self.synced = False
        self.resource_version = None
        self.outage.failed(exc, verb)
