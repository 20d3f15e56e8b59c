"""What the Karmada API carbonshift writes to keeps, read from its policy CRDs, in memory.

Readers call :meth:`KarmadaCrds.api` (synchronous, never waits on the API server): the
:class:`~webhook.decision.karmada.api.KarmadaApi` the CRDs
``propagationpolicies.policy.karmada.io`` and ``clusterpropagationpolicies.policy.karmada.io``
say (whether their schemas keep ``overflowAffinities``, the pure
:func:`~webhook.decision.karmada.api.crd_overflow`), None until both were listed. A
background :class:`~webhook.kube.watch.ListWatch` per CRD (``apiextensions.k8s.io/v1``,
field selector ``metadata.name``) keeps it current, so a Karmada upgrade shows within
seconds; each cache holds the answer, never the schema. A CRD the API server does not
serve counts as absent; with neither present (no Karmada) the config decides. Starting
waits up to :data:`FIRST_READ_SECONDS` for the first answer, so the first admissions
already write the shape the API keeps; an API server slower than that leaves the config's
answer until the CRDs are read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, cast

import aiohttp
import orjson
import structlog
from kubernetes_asyncio import client

from webhook.decision.karmada.api import POLICY_CRDS, KarmadaApi, crd_overflow, from_crds
from webhook.kube.cache import WatchedCache
from webhook.kube.client import body
from webhook.model.resources import Resource
from webhook.runtime import metrics

log = structlog.get_logger("carbonshift.karmada")

RESOURCE = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition"
)
FIRST_READ_SECONDS = 5.0
"""How long starting waits for the CRDs' first answer."""


class _Named:
    """One CRD by name, listed and watched through ``ListWatch``'s custom-object call."""

    def __init__(self, api: client.ApiClient, name: str) -> None:
        self.api = api
        self.name = name
        self.extensions = client.ApiextensionsV1Api(api)

    async def list_cluster_custom_object(self, *_resource: str, **options: Any) -> Any:
        options.pop("label_selector", None)
        selector = f"metadata.name={self.name}"
        if options.get("watch"):  # the raw stream the watch reads
            return await self.extensions.list_custom_resource_definition(
                field_selector=selector, **options
            )
        response = cast(
            aiohttp.ClientResponse,
            await self.extensions.list_custom_resource_definition(
                field_selector=selector, _preload_content=False, **options
            ),
        )
        return await plain(response)


async def plain(response: aiohttp.ClientResponse) -> Any:
    """A response's JSON as plain data: a CRD read through the client's models would be
    checked field by field (and refused for any field a newer API server adds)."""
    return orjson.loads(await body(response))


class KarmadaCrds:
    """The policy CRDs' answers (a :class:`WatchedCache` each, holding ``overflow``)."""

    def __init__(self) -> None:
        self.caches: dict[str, WatchedCache[bool | None]] = {
            name: self._cache(name) for name in POLICY_CRDS
        }
        self._listed: set[str] = set()
        self._read = asyncio.Event()
        self._said: KarmadaApi | None = None

    def _cache(self, name: str) -> WatchedCache[bool | None]:
        def listed(_view: Mapping[str, bool | None]) -> None:
            self._changed(name)

        def objects(api: client.ApiClient) -> _Named:
            return _Named(api, name)

        return WatchedCache(
            RESOURCE, self._decode, kind="policy_crd", on_change=listed, objects=objects
        )

    def api(self) -> KarmadaApi | None:
        """What the CRDs say; None until every CRD was listed once, or when neither is
        served. An API server out of reach leaves the last answer."""
        if len(self._listed) < len(self.caches):
            return None
        return from_crds(v for c in self.caches.values() for v in c.items().values())

    @property
    def synced(self) -> bool:
        """Every CRD listed and followed right now."""
        return all(c.synced for c in self.caches.values())

    def answers(self) -> Mapping[str, bool | None]:
        """Each CRD listed: whether it keeps ``overflowAffinities`` (None: unreadable)."""
        return {n: v for c in self.caches.values() for n, v in c.items().items()}

    @staticmethod
    def _decode(obj: Mapping[str, Any], _previous: bool | None) -> bool | None:
        return crd_overflow(obj)

    def _changed(self, crd: str) -> None:
        """Say once when what the CRDs say changes (a Karmada upgrade or downgrade)."""
        self._listed.add(crd)
        if len(self._listed) == len(self.caches):
            self._read.set()
        now = self.api()
        if now is None or now == self._said:
            return
        self._said = now
        metrics.KARMADA_OVERFLOW.set(1 if now.overflow else 0)
        log.info(
            "karmada_api_read",
            shape=now.shape,
            why=now.why,
            crds=dict(self.answers()),
        )

    async def start(
        self,
        api: client.ApiClient,
        *,
        timeout_seconds: int = 300,
        wait_seconds: float = FIRST_READ_SECONDS,
    ) -> None:
        """Follow the CRDs in the background (until :meth:`stop`), after waiting up to
        ``wait_seconds`` for their first answer."""
        for cache in self.caches.values():
            cache.start(api, timeout_seconds=timeout_seconds)
        try:
            await asyncio.wait_for(self._read.wait(), wait_seconds)
        except TimeoutError:
            log.info(
                "karmada_api_not_read",
                seconds=wait_seconds,
                hint="karmada.version decides the placement shape until the policy CRDs are read",
            )

    async def stop(self) -> None:
        for cache in self.caches.values():
            await cache.stop()
