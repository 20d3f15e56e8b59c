"""The configuration file: one YAML document, validated once at start-up.

Every key is documented in the README ("Configuration"). A bad file raises
:class:`ConfigError` whose message names the offending key; the CLI prints it on one
line and exits with status 2.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from webhook.regions import zone_for_region

PROVIDER_NAMES = ("electricitymaps", "watttime", "ukgrid", "static", "trace")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ZONE_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


class ConfigError(ValueError):
    """The configuration is invalid; ``key`` is the dotted path of the culprit."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"config key '{key}': {message}")
        self.key = key


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterConfig:
    """A Karmada member cluster as carbonshift knows it."""

    name: str
    zone: str | None = None
    """Grid zone key; when absent it is derived from ``provider`` + ``region``."""
    provider: str | None = None
    region: str | None = None
    zones: tuple[str, ...] = ()
    """Cloud availability zones (Karmada ``Cluster.spec.zones``), for fieldSelector ``zone``."""
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Cluster labels, for the policy's ``labelSelector``."""

    @property
    def grid_zone(self) -> str | None:
        """The explicit zone, else the cloud region table's answer, else None."""
        return self.zone or zone_for_region(self.provider, self.region)


@dataclasses.dataclass(frozen=True, slots=True)
class WeightingConfig:
    """How intensities become Karmada static weights (formula in the README)."""

    exponent: float = 1.0
    """Sharpness: weight ~ (greenest / intensity) ** exponent. 0 means even weights."""
    scale: int = 100
    """Weight of the greenest candidate."""


@dataclasses.dataclass(frozen=True, slots=True)
class HysteresisConfig:
    """When a refresh may replace the placement in force (chosen with the simulator)."""

    margin: float = 0.1
    """The new placement's expected intensity must be this much lower (relative)."""
    dwell_hours: float = 12.0
    """A placement stays in force at least this long."""


@dataclasses.dataclass(frozen=True, slots=True)
class NodePoolConfig:
    """Karpenter NodePool behaviour."""

    low_below: float = 150.0
    """Intensity (gCO2eq/kWh) below which the local grid is classed ``low``."""
    high_from: float = 400.0
    """Intensity from which the local grid is classed ``high``."""
    topology_zones: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Cloud topology zone (``topology.kubernetes.io/zone``) -> grid zone, for ``zones``."""
    mutate_on_update: bool = False
    """Recompute on every UPDATE (changing requirements later makes Karpenter replace nodes)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ServiceConfig:
    """The Kubernetes Service in front of the webhook (names go into certificate SANs)."""

    name: str = "carbonshift"
    namespace: str = "carbonshift-system"

    def dns_names(self) -> tuple[str, ...]:
        """The names kube-apiserver may dial for this Service."""
        n, ns = self.name, self.namespace
        return (n, f"{n}.{ns}", f"{n}.{ns}.svc", f"{n}.{ns}.svc.cluster.local")


@dataclasses.dataclass(frozen=True, slots=True)
class FeedConfig:
    """Freshness of the in-memory intensity data and resilience of provider calls."""

    refresh_seconds: float = 300.0
    """Longest pause of the background refresher (it also wakes when an answer expires)."""
    max_age_seconds: float = 7200.0
    """Past this age a reading is stale: decisions fall back to the next provider."""
    timeout_seconds: float = 5.0
    """Timeout of one HTTP request to a provider."""
    retries: int = 2
    """Extra attempts after a timeout, connection error, 5xx or malformed body."""
    backoff_seconds: float = 0.5
    """Base of the jittered exponential backoff between attempts."""
    error_backoff_seconds: float = 30.0
    """How long a failed answer is cached before the provider is asked again."""
    breaker_failures: int = 5
    """Consecutive failures that open a provider's circuit breaker."""
    breaker_reset_seconds: float = 60.0
    """How long an open circuit skips a provider before one trial call."""
    min_ttl_seconds: float = 60.0
    """Shortest time an answer is reused, even if its period already ended."""
    max_ttl_seconds: float = 3600.0
    """Longest time an answer is reused, even if its period lasts longer."""
    forecasts: bool = True
    """Also fetch and cache forecasts (for the mean over a horizon)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    """The whole configuration. ``Config()`` is the built-in default (static data)."""

    zone: str | None = None
    clusters: Mapping[str, ClusterConfig] = dataclasses.field(default_factory=dict)
    providers: tuple[str, ...] = ("static",)
    provider_options: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    """Per-provider settings (``electricitymaps: {url: ...}``), validated by each provider."""
    weighting: WeightingConfig = WeightingConfig()
    hysteresis: HysteresisConfig = HysteresisConfig()
    nodepools: NodePoolConfig = NodePoolConfig()
    service: ServiceConfig = ServiceConfig()
    feed: FeedConfig = FeedConfig()

    def zones_in_use(self) -> tuple[str, ...]:
        """Every grid zone the configuration refers to, sorted."""
        zones = {c.grid_zone for c in self.clusters.values()} | {self.zone}
        zones |= set(self.nodepools.topology_zones.values())
        return tuple(sorted(z for z in zones if z))


# --- parsing ----------------------------------------------------------------------------

_TOP_KEYS = {
    "zone",
    "clusters",
    "providers",
    "weighting",
    "hysteresis",
    "nodepools",
    "service",
    "feed",
}


def load(path: str | Path | None) -> Config:
    """Read and validate a config file; ``None`` gives the default configuration."""
    if path is None:
        return Config()
    try:
        text = Path(path).read_text("utf-8")
    except OSError as exc:
        raise ConfigError("<file>", f"cannot read {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError("<file>", f"not valid YAML{where}") from None
    return parse(data if data is not None else {})


def parse(data: object) -> Config:
    """Validate an already-parsed document (a mapping)."""
    top = _mapping(data, "<root>")
    for key in top:
        if key not in _TOP_KEYS and key not in PROVIDER_NAMES:
            raise ConfigError(str(key), f"unknown key (known: {', '.join(sorted(_TOP_KEYS))})")
    providers = _providers(top.get("providers", ["static"]))
    options = {name: _mapping(top[name], name) for name in PROVIDER_NAMES if name in top}
    return Config(
        zone=_zone(top.get("zone"), "zone"),
        clusters=_clusters(top.get("clusters", {})),
        providers=providers,
        provider_options=options,
        weighting=_weighting(top.get("weighting", {})),
        hysteresis=_hysteresis(top.get("hysteresis", {})),
        nodepools=_nodepools(top.get("nodepools", {})),
        service=_service(top.get("service", {})),
        feed=_feed(top.get("feed", {})),
    )


def _mapping(value: object, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(key, f"must be a mapping, got {type(value).__name__}")
    for k in value:
        if not isinstance(k, str):
            raise ConfigError(key, f"keys must be strings, got {k!r}")
    return value


def _only(section: Mapping[str, Any], key: str, allowed: Sequence[str]) -> None:
    for k in section:
        if k not in allowed:
            raise ConfigError(f"{key}.{k}", f"unknown key (known: {', '.join(allowed)})")


def _zone(value: object, key: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _ZONE_KEY.match(value):
        raise ConfigError(key, f"must be a grid zone key such as DE or US-CAL-CISO, got {value!r}")
    return value


def _string(value: object, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(key, f"must be a non-empty string, got {value!r}")
    return value


def _number(value: object, key: str, *, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        raise ConfigError(key, f"must be a number >= {minimum:g}, got {value!r}")
    return float(value)


def _bool(value: object, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(key, f"must be true or false, got {value!r}")
    return value


def _string_map(value: object, key: str) -> dict[str, str]:
    section = _mapping(value, key)
    out = {}
    for k, v in section.items():
        out[k] = _string(v, f"{key}.{k}") if not isinstance(v, int | float) else str(v)
    return out


def _providers(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise ConfigError("providers", "must be a non-empty list, e.g. [electricitymaps, static]")
    names: list[str] = []
    for i, name in enumerate(value):
        if name not in PROVIDER_NAMES:
            raise ConfigError(
                f"providers[{i}]", f"unknown provider {name!r} (known: {', '.join(PROVIDER_NAMES)})"
            )
        if name in names:
            raise ConfigError(f"providers[{i}]", f"provider {name!r} is listed twice")
        names.append(name)
    return tuple(names)


def _clusters(value: object) -> dict[str, ClusterConfig]:
    section = _mapping(value, "clusters")
    clusters = {}
    for name, spec in section.items():
        key = f"clusters.{name}"
        if not _DNS_LABEL.match(name) and not re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", name):
            raise ConfigError(key, "cluster names must be DNS-1123 names (lowercase, digits, -, .)")
        body = _mapping(spec if spec is not None else {}, key)
        _only(body, key, ("zone", "provider", "region", "zones", "labels"))
        zones = body.get("zones", [])
        if not isinstance(zones, list) or not all(isinstance(z, str) for z in zones):
            raise ConfigError(f"{key}.zones", "must be a list of cloud zone names")
        cluster = ClusterConfig(
            name=name,
            zone=_zone(body.get("zone"), f"{key}.zone"),
            provider=_string(body["provider"], f"{key}.provider") if "provider" in body else None,
            region=_string(body["region"], f"{key}.region") if "region" in body else None,
            zones=tuple(zones),
            labels=_string_map(body.get("labels", {}), f"{key}.labels"),
        )
        if cluster.grid_zone is None:
            raise ConfigError(
                key,
                "no grid zone: set zone (e.g. FR) or a provider/region the region table knows",
            )
        clusters[name] = cluster
    return clusters


def _weighting(value: object) -> WeightingConfig:
    section = _mapping(value, "weighting")
    _only(section, "weighting", ("exponent", "scale"))
    default = WeightingConfig()
    scale = section.get("scale", default.scale)
    if isinstance(scale, bool) or not isinstance(scale, int) or not 1 <= scale <= 10_000:
        raise ConfigError("weighting.scale", f"must be an integer from 1 to 10000, got {scale!r}")
    exponent = _number(section.get("exponent", default.exponent), "weighting.exponent")
    if exponent > 8:
        raise ConfigError("weighting.exponent", f"must be at most 8, got {exponent:g}")
    return WeightingConfig(exponent=exponent, scale=scale)


def _hysteresis(value: object) -> HysteresisConfig:
    section = _mapping(value, "hysteresis")
    _only(section, "hysteresis", ("margin", "dwell_hours"))
    default = HysteresisConfig()
    margin = _number(section.get("margin", default.margin), "hysteresis.margin")
    if margin >= 1:
        raise ConfigError("hysteresis.margin", f"must be below 1 (0.1 = 10%), got {margin:g}")
    dwell = _number(section.get("dwell_hours", default.dwell_hours), "hysteresis.dwell_hours")
    return HysteresisConfig(margin=margin, dwell_hours=dwell)


def _nodepools(value: object) -> NodePoolConfig:
    section = _mapping(value, "nodepools")
    _only(section, "nodepools", ("low_below", "high_from", "topology_zones", "mutate_on_update"))
    default = NodePoolConfig()
    low = _number(section.get("low_below", default.low_below), "nodepools.low_below")
    high = _number(section.get("high_from", default.high_from), "nodepools.high_from")
    if high < low:
        raise ConfigError("nodepools.high_from", f"must be >= low_below ({low:g}), got {high:g}")
    topo = _mapping(section.get("topology_zones", {}), "nodepools.topology_zones")
    zones = {k: _zone(v, f"nodepools.topology_zones.{k}") or "" for k, v in topo.items()}
    for k, z in zones.items():
        if not z:
            raise ConfigError(f"nodepools.topology_zones.{k}", "must name a grid zone")
    update = _bool(section.get("mutate_on_update", False), "nodepools.mutate_on_update")
    return NodePoolConfig(
        low_below=low, high_from=high, topology_zones=zones, mutate_on_update=update
    )


def _service(value: object) -> ServiceConfig:
    section = _mapping(value, "service")
    _only(section, "service", ("name", "namespace"))
    default = ServiceConfig()
    out = ServiceConfig(
        name=_string(section.get("name", default.name), "service.name"),
        namespace=_string(section.get("namespace", default.namespace), "service.namespace"),
    )
    for key, v in (("service.name", out.name), ("service.namespace", out.namespace)):
        if not _DNS_LABEL.match(v):
            raise ConfigError(key, f"must be a DNS-1123 label, got {v!r}")
    return out


_FEED_NUMBERS = {
    "refresh_seconds": 1.0,
    "max_age_seconds": 1.0,
    "timeout_seconds": 0.05,
    "backoff_seconds": 0.0,
    "error_backoff_seconds": 1.0,
    "breaker_reset_seconds": 1.0,
    "min_ttl_seconds": 1.0,
    "max_ttl_seconds": 1.0,
}
"""Numeric ``feed`` keys and their minimum."""
_FEED_INTEGERS = {"retries": (0, 10), "breaker_failures": (1, 1000)}
"""Integer ``feed`` keys and their allowed range."""


def _feed(value: object) -> FeedConfig:
    section = _mapping(value, "feed")
    _only(section, "feed", (*_FEED_NUMBERS, *_FEED_INTEGERS, "forecasts"))
    default = FeedConfig()
    values: dict[str, Any] = {}
    for key, minimum in _FEED_NUMBERS.items():
        raw = section.get(key, getattr(default, key))
        values[key] = _number(raw, f"feed.{key}", minimum=minimum)
    for key, (low, high) in _FEED_INTEGERS.items():
        raw = section.get(key, getattr(default, key))
        if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
            raise ConfigError(
                f"feed.{key}", f"must be an integer from {low} to {high}, got {raw!r}"
            )
        values[key] = raw
    values["forecasts"] = _bool(section.get("forecasts", default.forecasts), "feed.forecasts")
    if values["max_ttl_seconds"] < values["min_ttl_seconds"]:
        raise ConfigError(
            "feed.max_ttl_seconds",
            f"must be >= min_ttl_seconds ({values['min_ttl_seconds']:g})",
        )
    return FeedConfig(**values)
