"""The configuration file: one YAML document, validated once at start-up.

Every key is documented in the README ("Configuration"). The document is described by the
structs below (unknown keys refused, limits as ``msgspec.Meta``) and converted through
:func:`webhook.model.validation.convert`; rules between keys are checked after. A bad file raises
:class:`~webhook.model.validation.InvalidInput` naming the key path (``feed.retries: expected int
<= 10, got 99``); the CLI prints it on one line and exits with status 2.

Top-level keys named after a provider of :data:`~webhook.model.catalog.CATALOG`
(``electricitymaps:``, ``trace:``, ...) are that provider's options: the provider's row
checks them and ``Config.provider_options`` keeps them for the provider's factory.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from webhook.model import resilience
from webhook.model.catalog import CATALOG as PROVIDERS
from webhook.model.regions import zone_for_region
from webhook.model.validation import (
    GridZone,
    InvalidInput,
    Schema,
    check,
    convert,
    pattern,
    read_yaml,
)
from webhook.model.zones import check_zone

DnsLabel = Annotated[
    str,
    pattern(
        r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
        "a DNS-1123 label (lowercase letters, digits and '-', at most 63)",
    ),
]
ClusterName = Annotated[
    str,
    pattern(
        r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$",
        "a DNS-1123 name (lowercase letters, digits, '-' and '.')",
    ),
]
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
AtLeast0 = Annotated[float, msgspec.Meta(ge=0)]
AtLeast1 = Annotated[float, msgspec.Meta(ge=1)]


class ClusterConfig(Schema, frozen=True):
    """A Karmada member cluster as carbonshift knows it."""

    name: str = ""
    """The key under ``clusters`` (filled in by :func:`parse`; not a key of its own)."""
    zone: GridZone | None = None
    """Grid zone key; when absent it is derived from ``provider`` + ``region``."""
    provider: NonEmpty | None = None
    region: NonEmpty | None = None
    zones: tuple[str, ...] = ()
    """Cloud availability zones (Karmada ``Cluster.spec.zones``), for fieldSelector ``zone``."""
    labels: Mapping[str, str] = {}
    """Cluster labels, for the policy's ``labelSelector``."""

    @property
    def grid_zone(self) -> str | None:
        """The explicit zone, else the cloud region table's answer, else None."""
        return self.zone or zone_for_region(self.provider, self.region)


class WeightingConfig(Schema, frozen=True):
    """How intensities become Karmada static weights (formula in the README)."""

    exponent: Annotated[float, msgspec.Meta(ge=0, le=8)] = 1.0
    """Sharpness: weight ~ (greenest / intensity) ** exponent. 0 means even weights."""
    scale: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 100
    """Weight of the greenest candidate."""


class HysteresisConfig(Schema, frozen=True):
    """When a refresh may replace the placement in force (chosen with the simulator)."""

    margin: Annotated[float, msgspec.Meta(ge=0, lt=1)] = 0.05
    """The new placement's expected intensity must be this much lower (relative)."""
    dwell_hours: AtLeast0 = 4.0
    """A placement stays in force at least this long."""


class CarbonPriceConfig(Schema, frozen=True):
    """NodePool strategy ``price``: NodeOverlays that add each instance size's carbon cost
    to its price (:mod:`webhook.decision.karpenter.carbonprice`)."""

    usd_per_tonne: Annotated[float, msgspec.Meta(ge=0, le=100_000)] = 190.0
    """Carbon price in US dollars per tonne CO2e (default: the US EPA's 2023 social cost of
    carbon, 2 % discount rate, for 2020 emissions)."""
    watts_per_vcpu: Mapping[NonEmpty, Annotated[float, msgspec.Meta(gt=0, le=1000)]] = (
        msgspec.field(default_factory=lambda: {"amd64": 2.12, "arm64": 1.08})
    )
    """Average watts per vCPU by ``kubernetes.io/arch`` at 50 % utilisation (Cloud Carbon
    Footprint: AWS fallback 0.74-3.5 W for amd64, Graviton2 0.47-1.69 W for arm64)."""
    pue: Annotated[float, msgspec.Meta(ge=1, le=3)] = 1.0
    """Power usage effectiveness applied on top (1.0: the servers' energy alone)."""
    vcpus: Annotated[
        tuple[Annotated[int, msgspec.Meta(ge=1, le=4096)], ...], msgspec.Meta(min_length=1)
    ] = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256)
    """Instance sizes (vCPUs) priced: one NodeOverlay per architecture and size."""
    cpu_labels: Mapping[NonEmpty, NonEmpty] = {}
    """NodeClass group -> the instance-type label holding vCPUs, beside the built-in AWS,
    Azure and kwok ones."""
    weight: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 1
    """The overlays' ``spec.weight``: a user's own price overlay of higher weight wins."""
    min_interval_seconds: AtLeast0 = 1800.0
    """Least time between two price changes (Karpenter consolidates on each)."""


class NodePoolConfig(Schema, frozen=True):
    """Karpenter NodePool behaviour."""

    low_below: AtLeast0 = 150.0
    """Intensity (gCO2eq/kWh) below which the local grid is classed ``low``."""
    high_from: AtLeast0 = 400.0
    """Intensity from which the local grid is classed ``high``."""
    topology_zones: Mapping[str, GridZone] = {}
    """Cloud topology zone (``topology.kubernetes.io/zone``) -> grid zone, for ``zones``."""
    min_zones: Annotated[int, msgspec.Meta(ge=1)] = 2
    """Strategy ``zones`` keeps at least this many zones (when the pool allows that many)."""
    mutate_on_update: bool = False
    """Recompute on every UPDATE (changing requirements later makes Karpenter replace nodes)."""
    ladder: Annotated[
        tuple[Annotated[float, msgspec.Meta(ge=0, le=1)], ...], msgspec.Meta(min_length=2)
    ] = (1.0, 0.5, 0.0)
    """Strategy ``ladder``: the shares of the user's ``limits.cpu`` a pool steps through,
    the whole limit (1.0) first, decreasing (:mod:`webhook.decision.karpenter.ladder`)."""
    price: CarbonPriceConfig = CarbonPriceConfig()
    """Strategy ``price`` (the default): the carbon price NodeOverlays."""
    pause_confidence: Annotated[float, msgspec.Meta(gt=0, lt=1)] | None = None
    """The leader's pause and ladder wait only for an hour greener than now with at least
    this probability, by the past errors of the forecast they read (the feed's judged
    windows, hour by hour ahead; :func:`webhook.decision.pause.surely`). None (the
    default): the forecast's greenest hour decides alone; on the 2023 traces every
    setting from 0.5 to 0.9 captured less of the saving (docs/results.md)."""


class LabelsConfig(Schema, frozen=True):
    """The ``carbonshift.io/intensity`` label the leader keeps on every Karmada Cluster."""

    enabled: bool = True
    """Write the label and annotations (only the leader replica ever writes)."""
    low_below: AtLeast0 | None = None
    """Class ``low`` below this gCO2eq/kWh (default: ``nodepools.low_below``)."""
    high_from: AtLeast0 | None = None
    """Class ``high`` from this gCO2eq/kWh (default: ``nodepools.high_from``)."""
    band: Annotated[float, msgspec.Meta(ge=0, lt=1)] = 0.1
    """Hysteresis: a class changes only once the intensity is this far (relative) past the
    threshold, so a cluster hovering at a threshold keeps its label."""
    min_interval_seconds: AtLeast0 = 1800.0
    """At most one class change per cluster in this many seconds."""
    interval_seconds: AtLeast1 = 60.0
    """Longest pause between passes (a pass also runs after every feed refresh and every
    change of the fleet)."""

    def thresholds(self, nodepools: NodePoolConfig) -> tuple[float, float]:
        """``(low_below, high_from)`` in force: these, else the NodePool ones."""
        low = nodepools.low_below if self.low_below is None else self.low_below
        high = nodepools.high_from if self.high_from is None else self.high_from
        return low, high


Forecast = Literal["day-ahead-profile", "none", "provider", "best"]


class ReevaluateConfig(Schema, frozen=True):
    """The leader's periodic re-evaluation of managed objects after creation."""

    enabled: bool = True
    """Re-evaluate managed objects (needs a cluster connection; ignored without one)."""
    interval_seconds: AtLeast1 = 300.0
    """Each managed object is looked at again at least this often (a safety net: a change
    of the object, its namespace, the intensities, the fleet or a hold ending is acted on
    at once)."""
    min_interval_seconds: AtLeast0 = 1800.0
    """At most one write by the re-evaluation per object in this many seconds."""
    forecast: Forecast = "best"
    """What the re-evaluation looks ahead with: ``best`` (the default: per zone, whichever
    of the next two ranked the hours of the window better on the last days the feed kept;
    the profile on ties and until the provider's forecasts were judged on enough windows),
    ``day-ahead-profile`` (built from the feed's hourly history; until it holds a day, the
    current intensity), ``provider`` (the provider's own forecast) or ``none`` (current
    intensity, as admission). Policies rank on the forecast mean over the next 24 h;
    NodePool pauses wait for a cleaner hour."""


class RebalanceConfig(Schema, frozen=True):
    """Moving replicas back to greener tiers of an ordered fill (the leader only).

    Karmada never moves replicas back when room returns on a greener cluster; the leader
    asks for a Fresh reschedule (a WorkloadRebalancer) when the saving over the forecast
    window beats the cost of the moves by ``margin``, within the move budgets
    (:func:`webhook.decision.karmada.capacity.plan_move`).
    """

    enabled: bool = True
    """Move replicas back (needs a cluster connection and re-evaluation)."""
    move_cost_hours: AtLeast0 = 1.0
    """Cost of moving one replica, as hours of running it where it goes."""
    margin: Annotated[float, msgspec.Meta(ge=0, le=10)] = 0.2
    """The saving must beat the moves' cost by this much (relative)."""
    horizon_hours: Annotated[float, msgspec.Meta(gt=0, le=168)] = 24.0
    """Hours the saving is counted over (the forecast window)."""
    max_moves_per_policy: Annotated[int, msgspec.Meta(ge=1)] = 50
    """At most this many replicas moved per policy and hour."""
    max_moves_per_hour: Annotated[int, msgspec.Meta(ge=1)] = 500
    """At most this many replicas moved in the whole fleet per hour."""
    replica_watts: Annotated[float, msgspec.Meta(gt=0)] = 100.0
    """Power of one replica, to state the expected saving in grams in Events."""


class CarryConfig(Schema, frozen=True):
    """The non-workloads a managed policy selects (ConfigMaps, Secrets, Services...) go to
    every cluster its replicas may be put on (the leader only; docs/annotations.md).

    Karmada sends a term's overflow tiers workloads only; the leader adds a ``requiredBy``
    snapshot of every tier's clusters to the policy's non-workload bindings
    (:mod:`webhook.decision.karmada.carry`). Without it (or without a cluster connection) such a
    policy keeps all its clusters in one group: carbon weights instead of the ordered fill.
    """

    enabled: bool = True
    """Carry the non-workloads (needs a cluster connection)."""
    interval_seconds: AtLeast1 = 10.0
    """Pause between passes over the managed policies' bindings."""


class AccountingConfig(Schema, frozen=True):
    """Carbon accounting of the managed objects (the leader only; README "Carbon accounting")."""

    enabled: bool = True
    """Account energy, emissions, the counterfactual and what was avoided (needs a cluster
    connection)."""
    interval_seconds: AtLeast1 = 300.0
    """Pause between accounting passes; an interval is counted at the intensity of its end."""
    watts_per_vcpu: Annotated[float, msgspec.Meta(gt=0, le=1000)] = 2.12
    """Average power of one requested vCPU: Cloud Carbon Footprint's AWS fallback (0.74 W
    min, 3.5 W max per vCPU) at its default 50 % utilisation."""
    pue: Annotated[float, msgspec.Meta(ge=1, le=3)] = 1.0
    """Data-centre power usage effectiveness the energy is multiplied by (CCF: AWS 1.135,
    GCP 1.1, Azure 1.185)."""
    embodied_g_per_vcpu_hour: AtLeast0 | None = None
    """Embodied emissions per vCPU-hour (None: not counted; CCF's m5 host: 0.479)."""
    configmap: DnsLabel = "carbonshift-accounting"
    """ConfigMap in the lease namespace where the leader keeps the totals across restarts."""
    prometheus_url: Annotated[str, msgspec.Meta(pattern=r"^https?://[^\s]+$")] | None = None
    """Prometheus that scrapes Kepler (v0.10+) on the member clusters and the NodePools'
    nodes: energy is then measured (``kepler_pod_cpu_joules_total``,
    ``kepler_node_cpu_joules_total``, method ``kepler``) wherever Kepler covers every
    cluster a workload ran in, else estimated (method ``coefficient``)."""
    kepler_zone: NonEmpty = "package"
    """The one Kepler energy zone counted (RAPL zones overlap; never summed across them)."""
    kepler_cluster_label: NonEmpty = "cluster"
    """Label naming the member cluster on Kepler's series (added by the scrape config)."""


Dispatch = Literal["external", "order", "none"]
QualifiedName = Annotated[
    str,
    pattern(
        r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$",
        "a domain-prefixed name such as carbonshift.io/carbon-window",
    ),
]


class KueueConfig(Schema, frozen=True):
    """Kueue MultiKueue: carbon-aware batch across worker clusters (the leader only;
    :mod:`webhook.decision.kueue`).

    Where: ``dispatch: external`` nominates each Workload's workers, greenest with room
    first (Kueue's ``multiKueue.dispatcherName`` set to ``dispatcher_name``); ``order``
    keeps Kueue's incremental dispatcher and writes the carbon order into each
    ``MultiKueueConfig.spec.clusters``, damped by ``hysteresis.margin`` and
    ``hysteresis.dwell_hours``; ``none`` leaves placement to Kueue. When: the admission
    check whose ``controllerName`` is ``admission_check_controller`` holds a Workload for a
    greener start within its Job's ``carbonshift.io/max-delay``."""

    enabled: bool = False
    """Run the MultiKueue dispatcher and admission check (needs a cluster connection to the
    MultiKueue manager and Kueue's CRDs)."""
    interval_seconds: AtLeast1 = 10.0
    """Pause between passes over the pending Workloads."""
    dispatch: Dispatch = "external"
    """``external`` (nominate workers: by carbon, else every active worker at once),
    ``order`` (order ``MultiKueueConfig.spec.clusters`` for Kueue's incremental dispatcher)
    or ``none``. In every mode the leader counts the Workloads nobody nominates."""
    dispatcher_name: QualifiedName = "carbonshift.io/carbon-dispatcher"
    """The ``multiKueue.dispatcherName`` users set in Kueue's Configuration for the
    ``external`` mode; carbonshift nominates only when Kueue names it."""
    round_seconds: AtLeast1 = 60.0
    """A round passes when no nominated worker admitted the Workload for this long; each
    adds the next ``step`` workers in carbon order."""
    step: Annotated[int, msgspec.Meta(ge=1, le=20)] = 1
    """Workers nominated first, and added per round."""
    default_runtime_seconds: Annotated[float, msgspec.Meta(gt=0, le=2_592_000)] = 3600.0
    """Run time of a Job without ``spec.maximumExecutionTimeSeconds`` on its Workload or
    ``carbonshift.io/expected-runtime``; also the representative run time of the
    ``order`` mode's ranking."""
    admission_check_controller: QualifiedName = "carbonshift.io/carbon-window"
    """The ``spec.controllerName`` of the AdmissionChecks carbonshift answers (the carbon
    window)."""
    default_max_delay_seconds: Annotated[float, msgspec.Meta(gt=0, le=604_800)] | None = None
    """How long a Job without ``carbonshift.io/max-delay`` may be held for a greener start
    (None: such a Job is never held)."""
    namespace: NonEmpty = "kueue-system"
    """Kueue's namespace on the manager (its Configuration's ``namespace``): where the
    Secrets with the workers' kubeconfigs are, as the MultiKueueClusters name them."""


ClientAuthPath = Literal["scheduler", "metrics"]
Seconds = Annotated[float, msgspec.Meta(gt=0, le=3600)]


KarmadaVersion = Annotated[
    str,
    pattern(
        r"^(auto|v?[0-9]+[.][0-9]+([.][0-9]+)?)$",
        "auto or a Karmada release such as 1.16 or v1.18.2",
    ),
]


class KarmadaConfig(Schema, frozen=True):
    """The Karmada release carbonshift writes policies for (docs/install.md, "Supported
    versions"): which placement shape its API server keeps
    (:mod:`webhook.decision.karmada.api`)."""

    version: KarmadaVersion = "auto"
    """``auto``: read the policy CRDs' schemas when connected (without a connection the
    ordered failover groups every release keeps); a release (``1.16``, ``v1.18.2``): the
    shape it keeps, ``overflowAffinities`` from 1.18 on. Connected, a CRD without
    ``overflowAffinities`` always wins."""


class OcmConfig(Schema, frozen=True):
    """Open Cluster Management: the ``AddOnPlacementScore`` ``carbon`` the leader keeps in
    every ManagedCluster's namespace (docs/ocm.md)."""

    enabled: bool = True
    """Publish the scores (needs a cluster connection; nothing happens without OCM's CRDs)."""
    interval_seconds: AtLeast1 = 60.0
    """Each ManagedCluster's scores are looked at again at least this often (a safety net:
    a change of the cluster, its score or its zone's reading is acted on at once)."""


class ServiceConfig(Schema, frozen=True):
    """The Kubernetes Service in front of the webhook (names go into certificate SANs) and
    how the HTTPS server protects itself: client certificates, timeouts, admission bound."""

    name: DnsLabel = "carbonshift"
    namespace: DnsLabel = "carbonshift-system"
    client_ca: NonEmpty | None = None
    """PEM file of the CAs whose client certificates may call the ``client_auth`` paths
    (None: no client certificates asked for). ``/mutate`` and the probes never need one."""
    client_auth: tuple[ClientAuthPath, ...] = ("scheduler", "metrics")
    """What needs a client certificate once ``client_ca`` is set: ``scheduler`` (the
    Karmada and extender endpoints), ``metrics`` (``/metrics``)."""
    max_concurrent_admissions: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 256
    """Admissions in progress at once (reading their body or deciding); past it an
    admission is answered at once: allowed, unchanged, with a warning."""
    max_queue_seconds: Seconds = 1.0
    """An admission that waited longer than this from its first byte to its handler (the
    event loop was busy with others) is answered at once in the same way: a third of the
    webhook's ``timeoutSeconds`` (3 s) by default."""
    handshake_timeout_seconds: Seconds = 10.0
    """Longest TLS handshake."""
    header_timeout_seconds: Seconds = 10.0
    """Longest time from a request's first byte to the end of its headers."""
    body_timeout_seconds: Seconds = 10.0
    """Longest time to receive a request body once its headers are in (then 408)."""
    idle_timeout_seconds: Seconds = 120.0
    """An idle keep-alive connection is closed after this long (longer than the 90 s
    kube-apiserver and Go clients keep idle connections, so they close first)."""
    memo_max_bytes: Annotated[int, msgspec.Meta(ge=0, le=1 << 34)] = 32 << 20
    """Most bytes of admission inputs and answers the decision memo keeps (at most 4,096
    decisions, the oldest dropped first; 0: no memo)."""

    def dns_names(self) -> tuple[str, ...]:
        """The names kube-apiserver may dial for this Service."""
        n, ns = self.name, self.namespace
        return (n, f"{n}.{ns}", f"{n}.{ns}.svc", f"{n}.{ns}.svc.cluster.local")


class FeedConfig(Schema, frozen=True):
    """Freshness of the in-memory intensity data and resilience of provider calls."""

    refresh_seconds: AtLeast1 = 300.0
    """Longest pause of the background refresher (it also wakes when an answer expires)."""
    max_age_seconds: AtLeast1 = 7200.0
    """Past this age a reading is stale: decisions fall back to the next provider."""
    timeout_seconds: Annotated[float, msgspec.Meta(ge=0.05)] = resilience.TIMEOUT_SECONDS
    """Timeout of one HTTP request to a provider."""
    retries: Annotated[int, msgspec.Meta(ge=0, le=10)] = resilience.RETRIES
    """Extra attempts after a timeout, connection error, 5xx or malformed body."""
    backoff_seconds: AtLeast0 = resilience.BACKOFF_SECONDS
    """Base of the jittered exponential backoff between attempts."""
    error_backoff_seconds: AtLeast1 = 30.0
    """How long a failed answer is cached before the provider is asked again."""
    breaker_failures: Annotated[int, msgspec.Meta(ge=1, le=1000)] = resilience.BREAKER_FAILURES
    """Consecutive failures that open a provider's circuit breaker."""
    breaker_reset_seconds: AtLeast1 = resilience.BREAKER_RESET_SECONDS
    """How long an open circuit skips a provider before one trial call."""
    min_ttl_seconds: AtLeast1 = 60.0
    """Shortest time an answer is reused, even if its period already ended."""
    max_ttl_seconds: AtLeast1 = 3600.0
    """Longest time an answer is reused, even if its period lasts longer."""
    forecasts: bool = True
    """Also fetch and cache forecasts (for the mean over a horizon)."""
    seasonal: bool = False
    """Also judge the seasonal forecaster (the ``forecast`` extra) for ``reevaluate.forecast:
    best``. Off: on the 2023 traces it ranked the hours below the day-ahead profile in every
    zone, and each of its daily fits (20 to 110 ms) would run on the event loop that
    answers admissions. ``carbonshift intensity`` judges it either way."""
    max_requested_zones: Annotated[int, msgspec.Meta(ge=0, le=100_000)] = 300
    """Most grid zones kept warm because only scheduler requests named them (the zones of
    the configuration and the fleet are always kept and not counted); the least recently
    asked is dropped for a new one once it was not asked for ``refresh_seconds``."""


class Config(Schema, frozen=True):
    """The whole configuration. ``Config()`` is the built-in default (static data)."""

    zone: GridZone | None = None
    clusters: Mapping[ClusterName, ClusterConfig] = {}
    providers: Annotated[tuple[str, ...], msgspec.Meta(min_length=1)] = ("static",)
    provider_options: Mapping[str, Mapping[str, Any]] = {}
    """Per-provider settings (``electricitymaps: {url: ...}``), validated by each provider.
    In the file these are top-level sections named after the provider."""
    weighting: WeightingConfig = WeightingConfig()
    hysteresis: HysteresisConfig = HysteresisConfig()
    nodepools: NodePoolConfig = NodePoolConfig()
    labels: LabelsConfig = LabelsConfig()
    reevaluate: ReevaluateConfig = ReevaluateConfig()
    rebalance: RebalanceConfig = RebalanceConfig()
    carry: CarryConfig = CarryConfig()
    accounting: AccountingConfig = AccountingConfig()
    ocm: OcmConfig = OcmConfig()
    kueue: KueueConfig = KueueConfig()
    karmada: KarmadaConfig = KarmadaConfig()
    service: ServiceConfig = ServiceConfig()
    feed: FeedConfig = FeedConfig()

    def zones_in_use(self) -> tuple[str, ...]:
        """Every grid zone the configuration refers to, sorted."""
        zones = {c.grid_zone for c in self.clusters.values()} | {self.zone}
        zones |= set(self.nodepools.topology_zones.values())
        return tuple(sorted(z for z in zones if z))


# --- parsing ----------------------------------------------------------------------------


def load(path: str | Path | None) -> Config:
    """Read and validate a config file; ``None`` gives the default configuration.

    A problem raises :class:`InvalidInput` whose path starts with ``config FILE`` (what
    :func:`error_line` prints)."""
    if path is None:
        return Config()
    try:
        return parse(read_yaml(path))
    except InvalidInput as exc:
        where = f"config {path}"
        path_in_file = where if exc.path == str(path) else f"{where}: {exc.path}"
        raise InvalidInput(path_in_file, exc.message) from None


def error_line(exc: ValueError, file: str | Path | None = None) -> str:
    """The one line every command prints for a configuration problem (exit status 2):
    ``carbonshift: config FILE: KEY: message`` for a key of the config file ``file`` (also
    when found after loading, e.g. an unreadable ``service.client_ca``), ``carbonshift:
    config: KEY: message`` for a flag (``--kubeconfig``) or an environment variable."""
    text = str(exc)
    if text.startswith("config "):  # from load(): names its file already
        return f"carbonshift: {text}"
    key = exc.path if isinstance(exc, InvalidInput) else ""
    if file is None or not key or _NOT_IN_FILE.match(key):
        return f"carbonshift: config: {text}"
    return f"carbonshift: config {file}: {text}"


_NOT_IN_FILE = re.compile(r"^(--|[A-Z][A-Z0-9_]*$)")
"""Error paths that name a flag or an environment variable, not a key of the file."""


def parse(data: object) -> Config:
    """Validate an already-parsed document (a mapping)."""
    try:
        return _parse(data)
    except InvalidInput as exc:
        known = known_keys(exc.path) if exc.message == "unknown field" else None
        if known is None:
            raise
        raise InvalidInput(exc.path, f"unknown key (known: {', '.join(known)})") from None


def overlay(base: Config, partial: object) -> Config:
    """``base`` with ``partial`` over it: a part of a config file (some sections, some keys
    of a section) merged into ``base``'s file (:func:`document`) key by key, a list or a
    value replacing the base's, then validated as a whole file by :func:`parse` (its bounds,
    its rules between keys, its error paths: ``hysteresis.margin: expected float < 1.0,
    got 1``)."""
    return parse(_merged(document(base), convert(partial, dict[str, Any])))


def document(config: Config) -> dict[str, Any]:
    """The file :func:`parse` reads as ``config``: plain data, each provider's options a
    top-level section, each cluster named by its key alone."""
    doc: dict[str, Any] = msgspec.to_builtins(config)
    options = doc.pop("provider_options")
    for cluster in doc["clusters"].values():
        del cluster["name"]
    return {**doc, **options}


def _merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        below = out.get(key)
        if isinstance(below, Mapping) and isinstance(value, Mapping):
            out[key] = _merged(below, value)
        else:
            out[key] = value
    return out


def known_keys(path: str) -> list[str] | None:
    """The keys valid next to the last key of ``path`` (``feed.x``: the ``feed`` keys; a
    top-level key: every section and provider name), None when ``path`` is not in a
    section the schema describes."""
    *parents, _ = path.split(".")
    node: msgspec.inspect.Type = msgspec.inspect.type_info(Config)
    steps = list(parents)
    while True:
        if isinstance(node, msgspec.inspect.Metadata):
            node = node.type
        elif isinstance(node, msgspec.inspect.DictType) and steps:
            node, steps = node.value_type, steps[1:]
        elif isinstance(node, msgspec.inspect.StructType) and steps:
            fields = {f.encode_name: f.type for f in node.fields}
            if steps[0] not in fields:
                return None
            node, steps = fields[steps[0]], steps[1:]
        elif isinstance(node, msgspec.inspect.StructType):
            hidden = _NOT_KEYS.get(node.cls, ())
            names = [f.encode_name for f in node.fields if f.encode_name not in hidden]
            return names + list(PROVIDERS) if node.cls is Config else names
        else:
            return None


_NOT_KEYS: Mapping[type, tuple[str, ...]] = {
    ClusterConfig: ("name",),
    Config: ("provider_options",),
}
"""Fields of the structs that are not keys of the file (filled in by :func:`parse`)."""


def _parse(data: object) -> Config:
    doc = dict(convert(data, dict[str, Any]))
    options: dict[str, dict[str, Any]] = {}
    for name in [name for name in PROVIDERS if name in doc]:  # provider sections: options
        section = doc.pop(name)
        options[name] = convert({} if section is None else section, dict[str, Any], name)
        PROVIDERS[name].check(options[name])  # its shape; the factory reads files and env
    check("provider_options" not in doc, "provider_options", "unknown field")
    if isinstance(doc.get("providers"), str):  # a chain of one: ``providers: static``
        doc["providers"] = [doc["providers"]]
    config = convert(doc, Config)
    for i, name in enumerate(config.providers):
        known = ", ".join(PROVIDERS)
        check(name in PROVIDERS, f"providers[{i}]", f"unknown provider {name!r} (known: {known})")
        check(name not in config.providers[:i], f"providers[{i}]", f"{name!r} is listed twice")
    if config.zone is not None:
        check_zone(config.zone, "zone")
    for topology, zone in config.nodepools.topology_zones.items():
        check_zone(zone, f"nodepools.topology_zones.{topology}")
    clusters = {}
    for name, cluster in config.clusters.items():
        check(not cluster.name, f"clusters.{name}.name", "unknown field (the key is the name)")
        if cluster.zone is not None:
            check_zone(cluster.zone, f"clusters.{name}.zone")
        check(
            cluster.grid_zone is not None,
            f"clusters.{name}",
            "no grid zone: set zone (e.g. FR) or a provider/region the region table knows",
        )
        clusters[name] = msgspec.structs.replace(cluster, name=name)
    steps = config.nodepools.ladder
    check(
        steps[0] == 1.0 and all(a > b for a, b in itertools.pairwise(steps)),
        "nodepools.ladder",
        f"must start at 1.0 and decrease, got {list(steps)}",
    )
    low, high = config.nodepools.low_below, config.nodepools.high_from
    check(high >= low, "nodepools.high_from", f"must be >= low_below ({low:g}), got {high:g}")
    low, high = config.labels.thresholds(config.nodepools)
    check(
        high >= low,
        "labels.high_from" if config.labels.high_from is not None else "labels.low_below",
        f"must give high_from >= low_below, got low_below {low:g} and high_from {high:g}",
    )
    shortest, longest = config.feed.min_ttl_seconds, config.feed.max_ttl_seconds
    check(
        longest >= shortest,
        "feed.max_ttl_seconds",
        f"must be >= min_ttl_seconds ({shortest:g}), got {longest:g}",
    )
    return msgspec.structs.replace(config, clusters=clusters, provider_options=options)
