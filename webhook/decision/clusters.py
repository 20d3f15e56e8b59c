"""Scheduler-side decisions: grid zones of clusters and nodes, filter and score verdicts.

Pure functions over already-parsed facts and the in-memory intensity table; the HTTP
layer (:mod:`webhook.serve.schedapi`) parses requests and shapes answers. The ranking itself
(greenness, the max-intensity split) is :mod:`webhook.decision.ranking`'s.

Zone resolution order for a Karmada cluster: explicit ``zone``, the config's
``clusters`` entry, then provider + region through the built-in region table. For a
Kubernetes node: label ``carbonshift.io/grid-zone``, then ``topology.kubernetes.io/zone``
through the config's ``nodepools.topology_zones``, then ``topology.kubernetes.io/region``
through the region table (provider from ``spec.providerID``'s scheme when present).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import NamedTuple, Protocol, TypeVar

from webhook.decision.fleet import ZoneSource, declared_zone
from webhook.decision.liqo import peers as liqo
from webhook.decision.ranking import greenness, within_limit
from webhook.model.config import Config
from webhook.model.intensity import Reading
from webhook.model.objects import EMPTY
from webhook.model.regions import zone_for_region
from webhook.model.vocabulary import GRID_ZONE

REGION_LABEL = "topology.kubernetes.io/region"
ZONE_LABEL = "topology.kubernetes.io/zone"
EXTENDER_MAX_SCORE = 10
"""kube-scheduler's MaxExtenderPriority."""

_PROVIDER_SCHEMES = {"aws": "aws", "gce": "gcp", "azure": "azure"}
_UNRESOLVED = "\x00unresolved"
"""Ranking key shared by every candidate without a grid zone (never a real zone key)."""


class Candidate(NamedTuple):
    """A cluster or node to judge: its name and what is known about its location.

    A named tuple: requests carry up to thousands of these, and tuples are cheap to make.
    """

    name: str
    zone: str | None = None
    """Grid zone named explicitly by the caller."""
    provider: str | None = None
    region: str | None = None
    cloud_zone: str | None = None
    """Cloud availability zone (nodes: ``topology.kubernetes.io/zone``)."""
    peer: str | None = None
    """Liqo virtual nodes: the remote cluster's id (its zone is the remote cluster's)."""


class Located(Protocol):
    """What zone resolution reads from a candidate (a :class:`Candidate` or a parsed
    Karmada cluster)."""

    @property
    def name(self) -> str: ...
    @property
    def zone(self) -> str | None: ...
    @property
    def provider(self) -> str | None: ...
    @property
    def region(self) -> str | None: ...
    @property
    def cloud_zone(self) -> str | None: ...


class Verdict(NamedTuple):
    """A resolved grid zone and the reading behind it: shared by every candidate in one
    place (same zone facts), so a request judges each place once."""

    zone: str | None
    reading: Reading | None
    reason: str | None
    """Why the verdict is neutral or uncertain (no zone, no data, stale data); else None."""

    @property
    def intensity(self) -> float | None:
        """The reading's gCO2eq/kWh, None when unknown."""
        return self.reading.value if self.reading is not None else None

    @property
    def score(self) -> int:
        """Karmada score 0..100, greener higher; NEUTRAL_SCORE when unknown."""
        return greenness(self.intensity)

    @property
    def extender_score(self) -> int:
        """kube-scheduler extender score 0..10 (the Karmada score, rounded to tens)."""
        return (self.score + 5) // 10

    def data_age(self, now: datetime) -> int | None:
        """Whole seconds since the reading's period started, None when unknown."""
        return int(self.reading.age_seconds(now)) if self.reading is not None else None


Assessment = tuple[str, Verdict]
"""A candidate's name and its place's verdict."""
CandidateT = TypeVar("CandidateT", bound=Located)


_region_zone = lru_cache(maxsize=4096)(zone_for_region)
MAX_REGION = 64
"""Longest provider or region name looked up (no cloud region is near it): a longer one
has no zone, and is not kept in the memo."""


def region_zone(provider: str | None, region: str | None) -> str | None:
    """:func:`webhook.model.regions.zone_for_region`, memoized (requests repeat a few
    regions; the memo holds 4,096 short names at most, whatever requests send)."""
    if len(provider or "") > MAX_REGION or len(region or "") > MAX_REGION:
        return None
    return _region_zone(provider, region)


def cluster_zone(candidate: Located, config: Config) -> str | None:
    """Grid zone of a Karmada cluster: explicit, else config ``clusters``, else region table."""
    if candidate.zone:
        return candidate.zone
    configured = config.clusters.get(candidate.name)
    if configured is not None:
        return configured.grid_zone
    return region_zone(candidate.provider, candidate.region)


def node_candidate(
    name: str,
    labels: Mapping[str, str],
    provider_id: str | None,
    annotations: Mapping[str, str] = EMPTY,
) -> Candidate:
    """A node's location facts from its labels and ``spec.providerID``; a Liqo virtual
    node's are its remote cluster's (:mod:`webhook.decision.liqo.peers`)."""
    if liqo.is_virtual(labels):
        declared, _, _ = declared_zone(labels, annotations)
        return Candidate(
            name=name,
            zone=declared,
            provider=liqo.provider_of(labels),
            region=labels.get(liqo.REGION_LABEL) or None,
            peer=labels.get(liqo.REMOTE_ID_LABEL) or name,
        )
    provider = None
    if provider_id and "://" in provider_id:
        provider = _PROVIDER_SCHEMES.get(provider_id.split("://", 1)[0].lower())
    return Candidate(
        name=name,
        zone=labels.get(GRID_ZONE) or None,
        provider=provider,
        region=labels.get(REGION_LABEL) or None,
        cloud_zone=labels.get(ZONE_LABEL) or None,
    )


def node_zone(candidate: Candidate, config: Config, local: str | None = None) -> str | None:
    """Grid zone of a node: explicit label, else topology zone via config, else region,
    else ``local`` (the local cluster's zone). A Liqo virtual node's is its remote
    cluster's, in a Karmada Cluster's order (:func:`webhook.decision.liqo.peers.peer_zone`)."""
    if candidate.peer is not None:
        declared: tuple[str | None, ZoneSource] = (
            (candidate.zone, "label") if candidate.zone else (None, "unknown")
        )
        return liqo.peer_zone(
            candidate.peer, declared, candidate.provider, candidate.region, config
        )[0]
    if candidate.zone:
        return candidate.zone
    if candidate.cloud_zone:
        mapped = config.nodepools.topology_zones.get(candidate.cloud_zone)
        if mapped:
            return mapped
    return region_zone(candidate.provider, candidate.region) or local


def assess(
    candidates: Iterable[CandidateT],
    resolve: Callable[[CandidateT], str | None],
    lookup: Callable[[str], Reading | None],
    want: Callable[[str], str | None],
    *,
    named: Container[str] = (),
) -> list[Assessment]:
    """Resolve every candidate's zone and reading, in request order.

    ``resolve`` may depend on a candidate's name only for names in ``named`` (the
    configured clusters); every other candidate is resolved once per distinct location
    (zone, provider, region, cloud zone), and each grid zone is looked up once.
    Candidates in one place share one :class:`Verdict` object. ``lookup`` answers from
    memory; ``want`` is told of every zone first (so the background refresher keeps it
    warm) and answers None, or why the zone is not kept (its verdict is then neutral with
    that reason, and the zone is not looked up). Nothing here waits on the network.
    """
    zones: dict[str, tuple[Reading | None, str | None]] = {}
    places: dict[tuple[str | None, ...], Verdict] = {}
    out: list[Assessment] = []
    for candidate in candidates:
        name = candidate.name
        place: tuple[str | None, ...] = (
            candidate.zone,
            candidate.provider,
            candidate.region,
            candidate.cloud_zone,
        )
        if name in named:
            place = (name, *place)
        verdict = places.get(place)
        if verdict is None:
            zone = resolve(candidate)
            if zone is None:
                verdict = Verdict(None, None, _no_zone_reason(candidate))
            else:
                data = zones.get(zone)
                if data is None:
                    data = zones[zone] = _lookup(zone, lookup, want)
                verdict = Verdict(zone, *data)
            places[place] = verdict
        out.append((name, verdict))
    return out


def _lookup(
    zone: str, lookup: Callable[[str], Reading | None], want: Callable[[str], str | None]
) -> tuple[Reading | None, str | None]:
    refused = want(zone)
    if refused is not None:
        return None, f"no intensity data for zone {zone}: {refused}"
    reading = lookup(zone)
    if reading is None:
        return None, f"no intensity data yet for zone {zone}"
    if reading.stale:
        return reading, f"intensity data for zone {zone} is stale"
    return reading, None


def _no_zone_reason(candidate: Located) -> str:
    if candidate.region:
        where = f"{candidate.provider or 'any provider'} region {candidate.region}"
        return f"unknown grid zone for {where}"
    return "unknown grid zone (no zone, configured cluster, or provider/region)"


@dataclasses.dataclass(frozen=True, slots=True)
class FilterVerdict:
    """Which candidates stay (request order) and why the others were removed."""

    kept: list[str]
    removed: list[tuple[str, str]]
    warnings: list[str]


def filter_by_limit(assessed: Sequence[Assessment], limit: float | None) -> FilterVerdict:
    """Drop candidates whose grid is above ``limit`` (gCO2eq/kWh) via the ranking core.

    The split is made per grid zone with :func:`ranking.within_limit`: unknown zones stay;
    if every known zone is above the limit and no unknown remains, the greenest zone stays
    and a warning says so. Without a limit every candidate stays.
    """
    if limit is None:
        return FilterVerdict([name for name, _ in assessed], [], [])
    by_zone: dict[str, float | None] = {}
    for _, v in assessed:
        by_zone[v.zone if v.zone is not None else _UNRESOLVED] = v.intensity
    kept_zones, _ = within_limit(by_zone, limit)
    keep = set(kept_zones)
    kept: list[str] = []
    removed: list[tuple[str, str]] = []
    warnings: list[str] = []
    for name, v in assessed:
        if (v.zone if v.zone is not None else _UNRESOLVED) in keep:
            kept.append(name)
        else:
            removed.append((name, _above_reason(v, limit)))
    for zone in kept_zones:
        value = by_zone[zone]
        if value is not None and value > limit:
            warnings.append(
                f"every candidate is above max-intensity {limit:g}; kept the greenest, "
                f"zone {zone} at {value:.0f} gCO2eq/kWh"
            )
    return FilterVerdict(kept, removed, warnings)


def _above_reason(v: Verdict, limit: float) -> str:
    return f"grid zone {v.zone} at {v.intensity:.0f} gCO2eq/kWh is above max-intensity {limit:g}"
