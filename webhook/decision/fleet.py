"""A Karmada ``Cluster`` object as carbonshift's fleet inventory sees it (pure).

:func:`entry` reads one ``cluster.karmada.io/v1alpha1`` Cluster (the dict the API server
sends) into a :class:`ClusterEntry`: name, labels, provider, region, availability zones,
the ``Ready`` condition, and the grid zone with where it came from. The first that
applies wins:

1. label, then annotation, ``carbonshift.io/zone`` on the Cluster (``"label"`` /
   ``"annotation"``);
2. the config entry ``clusters.<name>`` (``"config"``);
3. the cloud region table for ``spec.provider`` + ``spec.region`` (``"region-table"``);
4. nothing (``"unknown"``): a known provider and region that the table does not list.

An object carbonshift cannot use raises :class:`~webhook.model.validation.InvalidInput` naming
the field: no name, a label set that is not a string map or is huge, or (when neither the
object nor the config names the zone) no ``spec.region`` or a provider the region table
does not know. The fields' types are checked as every structured input is, by msgspec
structs through :func:`~webhook.model.validation.convert` (a JSON null is an absent field,
as Go reads it). The caller skips it with a warning. A malformed ``carbonshift.io/zone``
value is not fatal: it is reported in :attr:`ClusterEntry.problems` and the next source
is used.

:func:`placement_clusters` turns the inventory (plus the config's ``clusters:``, which are
optional overrides then) into the ``Mapping[str, ClusterConfig]`` placement decisions and
the scheduler API read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from webhook.model import validation, vocabulary
from webhook.model.config import ClusterConfig, Config
from webhook.model.objects import condition, meta_of
from webhook.model.regions import BY_PROVIDER, zone_for_region
from webhook.model.validation import InvalidInput

ZoneSource = Literal["label", "annotation", "config", "region-table", "unknown"]

MAX_LABELS = 256
"""More labels than this on one Cluster: the object is skipped (a runaway label set)."""
MAX_LABEL_BYTES = 64 * 1024
"""More label (or annotation) text than this on one Cluster: skipped as well."""


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterEntry:
    """One member cluster of the fleet, as read from its Cluster object."""

    name: str
    labels: Mapping[str, str]
    provider: str | None
    region: str | None
    zones: tuple[str, ...]
    """Cloud availability zones: ``spec.zones``, or the legacy ``spec.zone``."""
    ready: bool
    """The ``Ready`` condition is ``True`` (missing, False or Unknown: not ready)."""
    grid_zone: str | None
    zone_source: ZoneSource
    problems: tuple[InvalidInput, ...] = ()
    """Values that were ignored (a malformed ``carbonshift.io/zone``)."""


class _Metadata(msgspec.Struct, frozen=True):
    name: str | None = None
    labels: dict[str, Any] | None = None
    """Values checked with the size (:func:`_string_map`), so an error names the map."""
    annotations: dict[str, Any] | None = None


class _Spec(msgspec.Struct, frozen=True):
    provider: str | None = None
    region: str | None = None
    zones: list[str] | None = None
    zone: str | None = None
    """The legacy single availability zone, read when ``zones`` is absent."""


class _Cluster(msgspec.Struct, frozen=True):
    """What :func:`entry` reads of a Cluster (other fields are not looked at; a null is
    an absent field, as Go reads it)."""

    metadata: _Metadata
    spec: _Spec | None = None


def _text(value: str | None) -> str | None:
    return (value.strip() or None) if value else None


def _string_map(value: Mapping[str, Any] | None, path: str) -> dict[str, str]:
    if not value:
        return {}
    if len(value) > MAX_LABELS:
        raise InvalidInput(path, f"{len(value)} entries (at most {MAX_LABELS} are read)")
    size = 0
    for key, item in value.items():
        if not isinstance(item, str):
            raise InvalidInput(path, f"must be a map of strings, {key!r} is not")
        size += len(key) + len(item)
    if size > MAX_LABEL_BYTES:
        raise InvalidInput(path, f"{size} characters (at most {MAX_LABEL_BYTES} are read)")
    return dict(value)


def _zones(spec: _Spec) -> tuple[str, ...]:
    if spec.zones is None:
        legacy = _text(spec.zone)
        return (legacy,) if legacy else ()
    return tuple(z for z in spec.zones if z)


def entry(obj: object, config: Config) -> ClusterEntry:
    """The inventory entry of one Cluster object; raises :class:`InvalidInput` when the
    object cannot be used (see the module docstring)."""
    cluster = validation.convert(obj, _Cluster)
    metadata, spec = cluster.metadata, cluster.spec or _Spec()
    name = _text(metadata.name)
    if not name:
        raise InvalidInput("metadata.name", "missing")
    labels = _string_map(metadata.labels, "metadata.labels")
    annotations = _string_map(metadata.annotations, "metadata.annotations")
    provider, region, zones = _text(spec.provider), _text(spec.region), _zones(spec)

    grid_zone, source, problems = declared_zone(labels, annotations)
    if grid_zone is None:
        known = config.clusters.get(name)
        if known is None or not known.grid_zone:
            if provider is not None and provider.lower() not in BY_PROVIDER:
                raise InvalidInput(
                    "spec.provider",
                    f"unknown provider {provider!r} (known: {', '.join(BY_PROVIDER)}) and no "
                    f"{vocabulary.ZONE} label or config entry",
                )
            if region is None:
                raise InvalidInput(
                    "spec.region", f"missing, and no {vocabulary.ZONE} label or config entry"
                )
        grid_zone, source = configured_zone(name, provider, region, config)
    return ClusterEntry(
        name=name,
        labels=labels,
        provider=provider,
        region=region,
        zones=zones,
        ready=condition(obj, "Ready") == "True",
        grid_zone=grid_zone,
        zone_source=source,
        problems=problems,
    )


def declared_zone(
    labels: Mapping[str, str], annotations: Mapping[str, str]
) -> tuple[str | None, ZoneSource, tuple[InvalidInput, ...]]:
    """Steps 1 of the order: the ``carbonshift.io/zone`` label, then annotation; a
    malformed value is a problem (the next source is used)."""
    problems: list[InvalidInput] = []
    explicit: tuple[tuple[ZoneSource, Mapping[str, str]], ...] = (
        ("label", labels),
        ("annotation", annotations),
    )
    for where, values in explicit:
        raw = values.get(vocabulary.ZONE)
        if raw is None:
            continue
        try:
            return vocabulary.zone(raw), where, tuple(problems)
        except InvalidInput as exc:
            problems.append(InvalidInput(f"metadata.{where}s.{exc.path}", exc.message))
    return None, "unknown", tuple(problems)


def configured_zone(
    name: str, provider: str | None, region: str | None, config: Config
) -> tuple[str | None, ZoneSource]:
    """Steps 2 to 4 of the order, for a place that declares no zone itself: the config's
    ``clusters.<name>``, the region table, else unknown."""
    known = config.clusters.get(name)
    if known is not None and known.grid_zone:
        return known.grid_zone, "config"
    if region is None:
        return None, "unknown"
    found = zone_for_region(provider, region)
    return found, "region-table" if found else "unknown"


def name_of(obj: object) -> str:
    """The Cluster's name for a log line, or ``"?"``: also for objects :func:`entry`
    refuses."""
    return meta_of(obj).name or "?"


def as_cluster(found: ClusterEntry) -> ClusterConfig:
    """What placement reads of one inventory entry: the Cluster object's labels, provider,
    region and availability zones (what Karmada's selectors match on) and the grid zone
    :func:`entry` resolved (a config zone already took its place in that order)."""
    return ClusterConfig(
        name=found.name,
        zone=found.grid_zone,
        provider=found.provider,
        region=found.region,
        zones=found.zones,
        labels=found.labels,
    )


def placement_clusters(
    entries: Mapping[str, ClusterEntry], configured: Mapping[str, ClusterConfig]
) -> Mapping[str, ClusterConfig]:
    """The member clusters placement works with, by name (sorted).

    Every Cluster of the inventory, as :func:`as_cluster` reads it; plus every cluster of
    the config's ``clusters:`` the inventory does not hold (a config-only cluster still
    counts). Without an inventory this is the config's map unchanged.
    """
    merged = {name: as_cluster(found) for name, found in entries.items()}
    for name, cluster in configured.items():
        merged.setdefault(name, cluster)
    return {name: merged[name] for name in sorted(merged)}
