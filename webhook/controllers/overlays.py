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

The keeper lists its overlays only when it needs to: on the first pass of a term as leader,
after a write or delete the API server refused (a conflict: someone else wrote), and on
the pass after one that wrote (to read Karpenter's verdict on what was written). In
between it holds what it listed and what the API server answered to its writes, so a
pass with nothing to change makes no call.

Writes happen only while leading; each price change is a ``CarbonPriceChanged`` Event on
every priced pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.decision import optin
from webhook.decision.karpenter import carbonprice
from webhook.decision.karpenter.carbonprice import GROUP, KIND, RESOURCE, SELECTOR, VERSION, Pool
from webhook.decision.outcome import lookup
from webhook.kinds import Context
from webhook.kinds.nodepools import NODEPOOL
from webhook.kube.client import FIELD_MANAGER, REQUEST_TIMEOUT, absent, error_name, refused
from webhook.kube.events import EventRecorder
from webhook.kube.writes import Gate, NotLeader
from webhook.model.config import Config
from webhook.model.objects import items, meta_of, text
from webhook.model.vocabulary import knobs
from webhook.runtime import metrics

log = structlog.get_logger("carbonshift.overlays")

Obj = dict[str, Any]
OVERLAYS = f"{RESOURCE}.{GROUP}"
NODEPOOL_API = NODEPOOL.api_version
FOLLOWS = NODEPOOL.kind
"""The kind whose objects, as the re-evaluation leaves them, the keeper prices."""


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
        self, api: client.ApiClient, config: Config, gate: Gate, *, events: EventRecorder | None
    ) -> None:
        self.objects = client.CustomObjectsApi(api)
        self.config = config
        self.gate = gate
        self.events = events
        self._told: set[str] = set()
        self._held: dict[str, Obj] | None = None
        """carbonshift's overlays by name as last listed or written; None: list them."""
        self._wrote = False

    def forget(self) -> None:
        """List the overlays again on the next pass (leadership lost, or a write refused)."""
        self._held = None

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
        """carbonshift's overlays by name (held, or listed when not held); None when they
        cannot be listed now."""
        if self._wrote:  # Karpenter's verdict on what the last pass wrote: read it once
            self._wrote = False
            self.forget()
        if self._held is not None:
            return dict(self._held)
        try:
            listed = await self.objects.list_cluster_custom_object(
                GROUP, VERSION, RESOURCE, label_selector=SELECTOR, _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if not (refused(exc, "list", OVERLAYS) or absent(exc, OVERLAYS)):
                log.warning("overlays_list_failed", error=error_name(exc))
            return None
        self._held = {name: o for o in items(listed, "items") if (name := meta_of(o).name)}
        return dict(self._held)

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
                    GROUP, VERSION, RESOURCE, want, **options
                )
            else:
                body = {**want, "metadata": {**want["metadata"]}}
                body["metadata"]["resourceVersion"] = have["metadata"].get("resourceVersion")
                stored = await self.objects.replace_cluster_custom_object(
                    GROUP, VERSION, RESOURCE, name, body, **options
                )
        except ApiException as exc:
            self.forget()  # someone else wrote (or it is gone): list again next pass
            if exc.status in (409, 422) or not refused(exc, "update", OVERLAYS):
                log.warning("overlay_write_failed", name=name, error=error_name(exc))
            return 0
        self._wrote = True
        if self._held is not None:
            self._held[name] = stored if isinstance(stored, dict) else want
        metrics.WRITES.labels(KIND).inc()
        return 1

    async def _delete(self, names: Sequence[str], kept: Mapping[str, Obj]) -> int:
        done = 0
        for name in names:
            if not self.gate.leading:
                raise NotLeader("not leading")
            try:
                await self.objects.delete_cluster_custom_object(
                    GROUP, VERSION, RESOURCE, name, _request_timeout=REQUEST_TIMEOUT
                )
            except ApiException as exc:
                if exc.status == 404 and self._held is not None:
                    self._held.pop(name, None)  # gone already
                else:
                    self.forget()
                if exc.status != 404 and not refused(exc, "delete", OVERLAYS):
                    log.warning("overlay_delete_failed", name=name, error=error_name(exc))
                continue
            if self._held is not None:
                self._held.pop(name, None)
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
