"""Which grid zones the provider chain can serve: checked once at start for the
configuration's zones, and for every zone a scheduler request names.

A provider either lists the zones it answers for or it does not:

- **listed**: ``static`` (the rows of the embedded table), ``ukgrid`` (``GB`` and
  ``GB-REGION-1`` .. ``GB-REGION-17``), ``trace`` (the zones of its trace files). Each of
  them has a ``zones()`` method and never answers for any other zone.
- **open**: ``electricitymaps`` and ``watttime``. Their zone lists are their own and change
  (Electricity Maps has ``XX`` for Northern Cyprus, WattTime calls Great Britain ``UK``),
  so any well-formed key may be served.

A zone of the configuration (``zone``, ``clusters.<name>.zone`` or the zone of its cloud
region, ``nodepools.topology_zones.<zone>``) can never be served when every provider of
the chain is listed and none lists it: :func:`check_config` refuses it with the closest
zones the chain does list. With an open provider in the chain nothing is refused here; a
zone no provider answers for ranks last and is reported at run time (a warning, the gauge
``carbonshift_zone_data_missing`` and ``/readyz``'s ``missingZones``), as are zones that
Karmada Clusters name at run time.

A zone that only a scheduler request names (a Karmada cluster's ``zone``, a Node's
``carbonshift.io/grid-zone``, a cloud region) is trusted less: it is kept warm only when a
provider of the chain serves it (:func:`requestable`). A listed provider serves its list;
an open one serves the zones it **knows** (:class:`Known`): ``electricitymaps`` the
Electricity Maps rows of the embedded table (every zone of the cloud region table among
them) and the keys of its ``zones`` option, ``watttime`` the keys and the WattTime regions
of its ``regions`` option. The zones the configuration or the fleet names are kept
whatever the providers say (:class:`webhook.feed.IntensityFeed`).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Protocol, runtime_checkable

from webhook.model.config import Config
from webhook.model.regions import zone_for_region
from webhook.model.validation import InvalidInput
from webhook.providers.base import Provider

ALIASES = {"UK": "GB", "EL": "GR", "GB-NI": "GB-NIR"}
"""Names people use for a zone whose key is another (ISO 3166 says GB and GR)."""


@runtime_checkable
class Listed(Protocol):
    """A provider that answers only for the zones it lists."""

    def zones(self) -> Sequence[str]: ...


@runtime_checkable
class Known(Protocol):
    """An open provider (it may answer for any key) that knows which zones a request may
    name for it: the zones it is known or configured to serve."""

    def known_zones(self) -> Collection[str]: ...


def requestable(providers: Sequence[Provider]) -> Mapping[str, frozenset[str] | None]:
    """Provider name -> the zones a scheduler request may make it fetch: a listed
    provider's list, an open provider's known zones; None (any zone) for a provider that
    says neither (a test double, a provider of your own)."""
    out: dict[str, frozenset[str] | None] = {}
    for provider in providers:
        if isinstance(provider, Listed):
            out[provider.name] = frozenset(provider.zones())
        elif isinstance(provider, Known):
            out[provider.name] = frozenset(provider.known_zones())
        else:
            out[provider.name] = None
    return out


def servable(providers: Sequence[Provider]) -> frozenset[str] | None:
    """Every zone the chain can serve; None when a provider of it is open (any zone)."""
    found: set[str] = set()
    for provider in providers:
        if not isinstance(provider, Listed):
            return None
        found.update(provider.zones())
    return frozenset(found)


def suggestions(zone: str, known: frozenset[str], limit: int = 3) -> list[str]:
    """The zones of ``known`` closest to ``zone``: its usual name's key (UK -> GB), the same
    key in upper case, the zone of a cloud region of that name, then the closest spellings
    (:func:`difflib.get_close_matches`)."""
    upper = zone.upper()
    found = [ALIASES.get(upper), upper, zone_for_region(None, zone)]
    found += difflib.get_close_matches(upper, sorted(known), n=limit, cutoff=0.6)
    picked = [z for z in dict.fromkeys(found) if z is not None and z in known and z != zone]
    return picked[:limit]


def config_zones(config: Config) -> Iterator[tuple[str, str, str | None]]:
    """``(key path, zone, cloud region)`` for every zone the configuration names."""
    if config.zone is not None:
        yield "zone", config.zone, None
    for name, cluster in sorted(config.clusters.items()):
        if cluster.zone is not None:
            yield f"clusters.{name}.zone", cluster.zone, None
        elif (zone := cluster.grid_zone) is not None:
            yield f"clusters.{name}.region", zone, cluster.region
    for topology, zone in sorted(config.nodepools.topology_zones.items()):
        yield f"nodepools.topology_zones.{topology}", zone, None


def check_config(config: Config, providers: Sequence[Provider]) -> None:
    """Refuse the first zone of ``config`` that no provider of the chain can ever serve
    (module docstring): :class:`InvalidInput` at its key, on one line, with the closest
    zones the chain serves."""
    known = servable(providers)
    if known is None:
        return
    chain = ", ".join(p.name for p in providers)
    for path, zone, region in config_zones(config):
        if zone in known:
            continue
        what = f"zone {zone!r}" if region is None else f"zone {zone!r} (of region {region!r})"
        message = f"no provider in the chain ({chain}) has data for {what}"
        close = suggestions(zone, known) if region is None else []
        if close:
            message += f"; did you mean {' or '.join(close)}?"
        else:
            message += "; electricitymaps or watttime in providers serve zones beyond these"
        raise InvalidInput(path, message)
