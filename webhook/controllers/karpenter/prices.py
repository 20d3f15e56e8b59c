"""The carbon price NodeOverlays of the NodePools under strategy ``price`` (the leader's).

Each re-evaluation pass (:class:`webhook.controllers.follower.Follower`) hands the NodePools
it listed to :meth:`OverlayKeeper.keep`, which makes the NodeOverlays carbonshift
keeps (label ``carbonshift.io/overlay=price``) what
:func:`webhook.decision.karpenter.carbonprice.plan`
wants for the opted-in pools under strategy ``price``:

- prices move only when :func:`~webhook.decision.karpenter.carbonprice.due` says so (hysteresis
  margin, minimum interval); pools joining or leaving are written at once, at the prices
  in force;
- with no priced pool left, or the local grid zone unknown, every kept overlay is deleted
  (no stale price outlives its pools); an unknown zone is a ``CarbonZoneUnknown`` Warning
  Event on every opted-in pool, whatever its strategy (none of them is touched);
- overlays without carbonshift's label are never read, written or deleted;
- a kept overlay that Karpenter did not apply (``ValidationSucceeded=False``: a conflict
  with a user's overlay of the same weight, say) is logged and told as a Warning Event.

The keeper never lists its overlays: it reads them from a
:class:`~webhook.kube.cache.WatchedCache` of the NodeOverlays carrying carbonshift's label
(:func:`watched`, started by the application manager when NodePools are re-evaluated),
which a watch keeps current, Karpenter's verdict in their status included. What the API
server answers to the keeper's own writes and deletes counts at once, for the rest of the
pass and the passes after it, until the watch delivers a newer version of that overlay
(so a pass never writes again what the last one wrote); a write or delete the API server
refused (a conflict: someone else wrote) leaves the overlay to what the watch delivers. A
pass with nothing to change makes no call. While the cache is not synced (the API server
unreachable, RBAC refusing the list or the watch) or the NodeOverlay CRD is not installed,
the keeper does nothing.

Writes happen only while leading; each price change is a ``CarbonPriceChanged`` Event on
every priced pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.controllers.keeper import Keeper
from webhook.decision import optin
from webhook.decision.karpenter import carbonprice
from webhook.decision.karpenter.carbonprice import NODE_OVERLAY, SELECTOR, Pool
from webhook.decision.outcome import lookup
from webhook.kinds import Context
from webhook.kinds.nodepools import NODEPOOL
from webhook.kube.cache import WatchedCache
from webhook.kube.client import FIELD_MANAGER, REQUEST_TIMEOUT, error_name, refused
from webhook.kube.events import EventRecorder
from webhook.kube.writes import Gate, NotLeader
from webhook.model.config import Config
from webhook.model.objects import items, meta_of, text
from webhook.model.vocabulary import knobs
from webhook.runtime import metrics

log = structlog.get_logger("carbonshift.overlays")

if TYPE_CHECKING:
    from webhook.controllers.follower import Follower

Obj = dict[str, Any]
OVERLAYS = NODE_OVERLAY.name
_COORDINATES = NODE_OVERLAY.group, NODE_OVERLAY.version, NODE_OVERLAY.plural
"""The custom objects API's first three arguments for NodeOverlays."""
NODEPOOL_API = NODEPOOL.api_version
FOLLOWS = NODEPOOL.kind
"""The kind whose objects, as the re-evaluation leaves them, the keeper prices."""


def watched() -> WatchedCache[Obj]:
    """The cache of carbonshift's NodeOverlays (label ``carbonshift.io/overlay=price``),
    the objects as stored, by name."""
    return WatchedCache(
        NODE_OVERLAY,
        _as_stored,
        kind="node_overlay",
        label_selector=SELECTOR,
    )


def _as_stored(obj: Mapping[str, Any], _: Obj | None) -> Obj:
    return dict(obj)


def opted_in(nodepools: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The NodePools opted in, by the admission's rules (cluster-scoped: their own label)."""
    return [obj for obj in nodepools if optin.not_opted_in(obj, None) is None]


def priced(nodepools: Sequence[Mapping[str, Any]]) -> list[tuple[Pool, Mapping[str, Any]]]:
    """The opted-in NodePools under strategy ``price`` (the default), with their objects."""
    found = []
    for obj in opted_in(nodepools):
        meta = meta_of(obj)
        if "price" not in knobs(meta.annotations, "nodepool").strategies:
            continue
        group = text(obj, "spec", "template", "spec", "nodeClassRef", "group")
        found.append((Pool(meta.name, group), obj))
    return found


class OverlayKeeper:
    """Keeps the carbon price NodeOverlays while this replica leads."""

    def __init__(
        self,
        api: client.ApiClient,
        config: Config,
        gate: Gate,
        *,
        events: EventRecorder | None,
        cache: WatchedCache[Obj] | None,
    ) -> None:
        """``cache``: carbonshift's NodeOverlays (:func:`watched`, started); None: the
        keeper keeps nothing."""
        self.objects = client.CustomObjectsApi(api)
        self.cache = cache
        self.config = config
        self.gate = gate
        self.events = events
        self._told: set[str] = set()
        self._answered: dict[str, tuple[str | None, Obj | None]] = {}
        """Name -> the version the cache held when the keeper wrote (None: none), and what
        the API server answered (None: deleted); it counts until the cache moves on."""

    def forget(self) -> None:
        """Read the overlays as the cache holds them (leadership lost: a new term starts
        from what the watch delivered)."""
        self._answered.clear()

    async def keep(self, nodepools: Sequence[Mapping[str, Any]], ctx: Context) -> int:
        """Bring the kept overlays in line for ``nodepools`` (every NodePool listed);
        the number of overlays written or deleted."""
        pools = priced(nodepools)
        kept = await self._kept()
        if kept is None:
            return 0
        zone = ctx.local_zone
        if zone is None:
            await self._zone_unknown(opted_in(nodepools))
        else:
            self._told.discard("zone-unknown")
        if not pools or zone is None:
            return await self._delete(sorted(kept), kept)
        intensity = lookup({"local": zone}, ctx.table).values["local"]
        if intensity is None:
            log.info("carbon_price_kept", zone=zone, reason="no intensity data for the zone")
            return 0
        settings = self.config.nodepools.price
        basis, since = carbonprice.basis_of(list(kept.values()))
        moved = any(
            meta_of(o).annotations.get(carbonprice.ZONE) != zone for o in kept.values()
        ) or carbonprice.due(
            basis,
            since,
            intensity,
            ctx.now,
            margin=self.config.hysteresis.margin,
            min_interval_seconds=settings.min_interval_seconds,
        )
        if moved or basis is None or since is None:  # (moved already, for the type checker)
            basis, since = intensity, ctx.now
        plan = carbonprice.plan([p for p, _ in pools], basis, settings, zone=zone, at=since)
        done = 0
        for name, want in sorted(plan.overlays.items()):
            have = kept.get(name)
            if have is None or carbonprice.differs(want, have):
                done += await self._write(want, have)
        done += await self._delete(sorted(set(kept) - set(plan.overlays)), kept)
        objs = {p.name: obj for p, obj in pools}
        if moved and done:
            note = f"{zone} at {basis:.0f} g/kWh, ${settings.usd_per_tonne:g}/t: " + (
                carbonprice.summary(plan.overlays) or "no size priced"
            )
            log.info(
                "carbon_price_changed", zone=zone, intensity=basis, overlays=len(plan.overlays)
            )
            for name, obj in sorted(objs.items()):
                if name not in plan.left:
                    await self._emit(obj, "CarbonPriceChanged", note, key=f"price-{basis:.0f}")
        for name, why in sorted(plan.left.items()):
            await self._emit(objs[name], "CarbonPriceLeft", why, warning=True, key="price-left")
        await self._not_applied(kept, objs)
        return done

    # --- the API server -------------------------------------------------------------------

    async def _kept(self) -> dict[str, Obj] | None:
        """carbonshift's overlays by name: the watched ones, with the keeper's own writes
        the watch has not delivered yet; None when the cache cannot say now."""
        cache = self.cache
        if cache is None or not cache.synced or not cache.served:
            return None
        kept = dict(cache.items())
        for name, (before, answer) in list(self._answered.items()):
            if _version(kept.get(name)) != before:  # the watch delivered a newer one
                del self._answered[name]
            elif answer is None:
                kept.pop(name, None)
            else:
                kept[name] = answer
        return kept

    def _answer(self, name: str, answer: Obj | None) -> None:
        """What the API server answered to a write or delete of ``name``."""
        if self.cache is None:
            return
        before = self._answered.get(name, (_version(self.cache.items().get(name)), None))[0]
        if before is None and answer is None:
            self._answered.pop(name, None)  # never delivered, and gone
        else:
            self._answered[name] = (before, answer)

    async def _write(self, want: Obj, have: Obj | None) -> int:
        if not self.gate.leading:
            raise NotLeader("not leading")
        name = want["metadata"]["name"]
        options: dict[str, Any] = {
            "field_manager": FIELD_MANAGER,
            "_request_timeout": REQUEST_TIMEOUT,
        }
        try:
            if have is None:
                stored = await self.objects.create_cluster_custom_object(
                    *_COORDINATES, want, **options
                )
            else:
                body = {**want, "metadata": {**want["metadata"]}}
                body["metadata"]["resourceVersion"] = have["metadata"].get("resourceVersion")
                stored = await self.objects.replace_cluster_custom_object(
                    *_COORDINATES, name, body, **options
                )
        except ApiException as exc:
            self._answered.pop(name, None)  # someone else wrote (or it is gone): the watch says
            if exc.status in (409, 422) or not refused(exc, "update", OVERLAYS):
                log.warning("overlay_write_failed", name=name, error=error_name(exc))
            return 0
        self._answer(name, stored if isinstance(stored, dict) else want)
        metrics.WRITES.labels(NODE_OVERLAY.kind).inc()
        return 1

    async def _delete(self, names: Sequence[str], kept: Mapping[str, Obj]) -> int:
        done = 0
        for name in names:
            if not self.gate.leading:
                raise NotLeader("not leading")
            try:
                await self.objects.delete_cluster_custom_object(
                    *_COORDINATES, name, _request_timeout=REQUEST_TIMEOUT
                )
            except ApiException as exc:
                if exc.status == 404:
                    self._answer(name, None)  # gone already
                else:
                    self._answered.pop(name, None)
                if exc.status != 404 and not refused(exc, "delete", OVERLAYS):
                    log.warning("overlay_delete_failed", name=name, error=error_name(exc))
                continue
            self._answer(name, None)
            done += 1
        if done:
            log.info("carbon_price_removed", overlays=done, of=len(kept))
        return done

    # --- telling ----------------------------------------------------------------------------

    async def _not_applied(
        self, kept: Mapping[str, Obj], pools: Mapping[str, Mapping[str, Any]]
    ) -> None:
        """Karpenter's verdict on the kept overlays: each one it refused, once."""
        for name, obj in sorted(kept.items()):
            for cond in items(obj, "status", "conditions"):
                if not isinstance(cond, Mapping) or (cond.get("type"), cond.get("status")) != (
                    "ValidationSucceeded",
                    "False",
                ):
                    continue
                why = f"{name}: {cond.get('reason')}: {cond.get('message')}"
                if why in self._told:
                    continue
                self._told.add(why)
                log.warning("overlay_not_applied", name=name, reason=cond.get("reason"))
                for pool in pools.values():
                    await self._emit(pool, "CarbonPriceNotApplied", why, warning=True)

    async def _zone_unknown(self, pools: Sequence[Mapping[str, Any]]) -> None:
        note = (
            "the local grid zone is unknown (no node names a region the region table knows and"
            " config zone is not set): no carbon price; label a node carbonshift.io/grid-zone"
        )
        if "zone-unknown" not in self._told:  # the Events say it on every pass, by key
            self._told.add("zone-unknown")
            log.warning("carbon_price_zone_unknown")
        for obj in pools:
            await self._emit(obj, "CarbonZoneUnknown", note, warning=True, key="zone-unknown")

    async def _emit(
        self,
        pool: Mapping[str, Any],
        reason: str,
        note: str,
        *,
        warning: bool = False,
        key: str | None = None,
    ) -> None:
        if self.events is None:
            return
        regarding = {"apiVersion": NODEPOOL_API, "kind": FOLLOWS, **pool}
        try:
            await self.events.emit(
                regarding,
                reason=reason,
                note=note,
                action="Price",
                type="Warning" if warning else "Normal",
                key=key,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an Event never stops the pass
            log.info("event_failed", reason=reason, error=error_name(exc))


def _version(obj: Mapping[str, Any] | None) -> str | None:
    return meta_of(obj).resource_version or None if obj is not None else None


class Pricing(Keeper):
    """Karpenter's keeper: prices every NodePool that asks for it with carbonshift's
    NodeOverlays (:class:`OverlayKeeper`), on the NodePools as they stand (every one,
    managed or not: a pool admission left alone still hears why it is not priced)."""

    name = "carbon_prices"
    kinds = frozenset({FOLLOWS})
    every = kinds

    def __init__(self, follower: Follower, *, cache: WatchedCache[Obj] | None) -> None:
        """``cache``: carbonshift's NodeOverlays (:func:`watched`, started with the
        application); None: nothing is priced."""
        super().__init__(follower)
        self.overlays = OverlayKeeper(
            follower.api, follower.config, follower.gate, events=follower.events, cache=cache
        )
        self.pools: dict[Hashable, Obj] = {}

    def stand(self, key: Hashable, obj: Obj, *, rewritten: bool) -> bool:
        before, self.pools[key] = self.pools.get(key), obj
        return before != obj

    def drop(self, key: Hashable) -> bool:
        return self.pools.pop(key, None) is not None

    def lost(self) -> None:
        self.overlays.forget()  # a new term reads the overlays as the watch has them

    async def keep(self, ctx: Context) -> int | None:
        return await self.overlays.keep(list(self.pools.values()), ctx)
