"""Every ``carbonshift.io/*`` label and annotation, and its one parser.

The admission webhook, the scheduler API, ``carbonshift mutate``, the simulator and the
reconciler read these keys only through this module, so a value means the same thing on
every path. A malformed value raises :class:`~webhook.model.validation.InvalidInput` whose
``path`` is the key; each caller decides what that means for it:

- admission (and the preview, which runs the admission code): the rule that key drives
  is not applied, the object is admitted otherwise as decided, and a short warning names
  the key and the value (:func:`warning`);
- the scheduler API: HTTP 400 naming the key.

:data:`KEYS` lists every key with where it goes and what it accepts (the README's
"Annotations" table says the same).
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from webhook import PREFIX
from webhook.model.validation import GRID_ZONE_PATTERN, InvalidInput

# --- keys ----------------------------------------------------------------------------------

ENABLED = PREFIX + "enabled"
"""Label: ``"false"`` opts an object (or namespace) out; cluster-scoped objects need ``"true"``."""
REFRESH = PREFIX + "refresh"
"""Annotation: a new value on UPDATE asks for a fresh decision."""
STRATEGY = PREFIX + "strategy"
"""Annotation: comma list (policies: fill, weighted, none; NodePools: price, efficiency,
zones, weight, pause, ladder, none)."""
MAX_CLUSTERS = PREFIX + "max-clusters"
"""Annotation (policies): green-first affinities, the N greenest clusters first."""
MAX_INTENSITY = PREFIX + "max-intensity"
"""Annotation (policies, workloads, Pods): leave out clusters/nodes above this gCO2eq/kWh."""
OVERRIDE = PREFIX + "override"
"""Annotation: ``"true"`` lets carbonshift replace placement fields the user set."""
DECISION = PREFIX + "decision"
"""Annotation written by carbonshift: why the object looks as it does, and what it owns
(parsed by :class:`webhook.decision.record.Record`)."""
REASON = PREFIX + "reason"
"""Annotation written by carbonshift beside :data:`DECISION`: the same decision as one short
human sentence (:func:`webhook.decision.reason.line`), so ``kubectl get -o yaml`` and
``kubectl describe`` say why without decoding JSON."""
INTENSITY_CLASS = PREFIX + "intensity"
"""Label written on NodePool templates (so on their nodes) and, by the leader, on every
Karmada Cluster: low | medium | high."""
INTENSITY_VALUE = PREFIX + "intensity-value"
"""Annotation written on Karmada Clusters: the intensity behind the label (gCO2eq/kWh)."""
INTENSITY_ZONE = PREFIX + "intensity-zone"
"""Annotation written on Karmada Clusters: the grid zone the intensity is for."""
INTENSITY_SOURCE = PREFIX + "intensity-source"
"""Annotation written on Karmada Clusters: the provider that gave the intensity."""
INTENSITY_TIME = PREFIX + "intensity-time"
"""Annotation written on Karmada Clusters: start of the period the intensity describes
(RFC 3339, UTC)."""
INTENSITY_SINCE = PREFIX + "intensity-since"
"""Annotation written on Karmada Clusters: when the class label last changed (RFC 3339)."""
GRID_ZONE = PREFIX + "grid-zone"
"""Node label naming the node's grid zone directly (scheduler extender)."""
ZONE = PREFIX + "zone"
"""Label or annotation on a Karmada Cluster naming its grid zone (wins over config and the
cloud region table)."""
MAX_PAUSE = PREFIX + "max-pause"
"""Annotation (NodePools, strategy pause): the longest a pause may last (``"24h"``, ``"90m"``)."""
OVERLAY = PREFIX + "overlay"
"""Label on the NodeOverlays carbonshift keeps (``price``); it never touches any other."""
EXPECTED_RUNTIME = PREFIX + "expected-runtime"
"""Annotation (Jobs queued by Kueue MultiKueue): how long the job runs (``"2h"``), what its
carbon window and the workers' ranking average over, when the Workload has no
``spec.maximumExecutionTimeSeconds``."""
MAX_DELAY = PREFIX + "max-delay"
"""Annotation (Jobs queued by Kueue MultiKueue): the longest carbonshift may hold the job for
a greener hour after it was created (``"8h"``); without it the job is not held (unless
``kueue.default_max_delay_seconds`` is set)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Key:
    """One row of the vocabulary: a key, where it goes, what it accepts."""

    name: str
    kind: Literal["label", "annotation"]
    on: str
    accepts: str
    written: bool = False
    """Written by carbonshift (users read it, never set it)."""
    scopes: tuple[Scope, ...] = ()
    """The decisions that read it as an annotation (:func:`knobs`); on any other, the
    key is misplaced and :func:`knobs` says so."""


Scope = Literal["policy", "nodepool"]
"""Which annotations a decision reads: ``policy`` ((Cluster)PropagationPolicy and
NamespaceOffloading), ``nodepool`` (Karpenter NodePool)."""
BOTH: tuple[Scope, ...] = ("policy", "nodepool")

KEYS = (
    Key(
        ENABLED,
        "label",
        "Namespace, policy, NodePool, NamespaceOffloading, Job (Kueue MultiKueue)",
        '"true" | "false"',
    ),
    Key(
        REFRESH,
        "annotation",
        "policy, NodePool",
        "any text; a new value on UPDATE re-decides",
        scopes=BOTH,
    ),
    Key(STRATEGY, "annotation", "policy, NodePool", "comma list of strategies", scopes=BOTH),
    Key(MAX_CLUSTERS, "annotation", "policy", "whole number >= 1", scopes=("policy",)),
    Key(
        MAX_INTENSITY,
        "annotation",
        "policy, workload, Pod, NamespaceOffloading",
        "number >= 0 (gCO2eq/kWh)",
        scopes=("policy",),
    ),
    Key(OVERRIDE, "annotation", "policy, NodePool", '"true" | "false"', scopes=BOTH),
    Key(
        DECISION,
        "annotation",
        "policy, NodePool, NamespaceOffloading",
        "JSON decision record",
        written=True,
    ),
    Key(
        REASON,
        "annotation",
        "policy, NodePool, NamespaceOffloading",
        "one line: the decision record in words",
        written=True,
    ),
    Key(
        INTENSITY_CLASS,
        "label",
        "NodePool template, Karmada Cluster, Liqo virtual node",
        "low | medium | high",
        written=True,
    ),
    Key(
        INTENSITY_VALUE,
        "annotation",
        "Karmada Cluster, Liqo virtual node, NodeOverlay",
        "number (gCO2eq/kWh)",
        written=True,
    ),
    Key(
        INTENSITY_ZONE,
        "annotation",
        "Karmada Cluster, Liqo virtual node, NodeOverlay",
        "grid zone key",
        written=True,
    ),
    Key(
        INTENSITY_SOURCE,
        "annotation",
        "Karmada Cluster, Liqo virtual node",
        "provider name",
        written=True,
    ),
    Key(
        INTENSITY_TIME,
        "annotation",
        "Karmada Cluster, Liqo virtual node",
        "RFC 3339 time (UTC)",
        written=True,
    ),
    Key(
        INTENSITY_SINCE,
        "annotation",
        "Karmada Cluster, Liqo virtual node, NodeOverlay",
        "RFC 3339 time (UTC)",
        written=True,
    ),
    Key(GRID_ZONE, "label", "Node", "grid zone key, e.g. DE"),
    Key(
        ZONE,
        "label",
        "Karmada Cluster, Liqo virtual node (label or annotation)",
        "grid zone key, e.g. SE-SE3",
    ),
    Key(
        MAX_PAUSE,
        "annotation",
        "NodePool",
        'duration > 0 up to 7 days: "24h", "90m", "1h30m"',
        scopes=("nodepool",),
    ),
    Key(OVERLAY, "label", "NodeOverlay", "price", written=True),
    Key(
        EXPECTED_RUNTIME,
        "annotation",
        "Job (Kueue MultiKueue)",
        'duration > 0 up to 720 hours: "2h", "90m", "1h30m"',
    ),
    Key(
        MAX_DELAY,
        "annotation",
        "Job (Kueue MultiKueue)",
        'duration > 0 up to 7 days: "8h", "90m", "1h30m"',
    ),
)
"""Every key carbonshift reads or writes."""

INTENSITY_CLASSES = ("low", "medium", "high")
"""Values of :data:`INTENSITY_CLASS`, greenest first."""

POLICY_STRATEGIES = ("fill", "weighted", "none")
NODEPOOL_STRATEGIES = ("price", "efficiency", "zones", "weight", "pause", "ladder", "none")
DEFAULT_NODEPOOL_STRATEGIES = frozenset({"price"})
"""An opted-in NodePool without ``carbonshift.io/strategy``: the carbon price."""


# --- parsers -------------------------------------------------------------------------------


def max_intensity(raw: str) -> float:
    """gCO2eq/kWh, a finite number >= 0 (``"250"``, ``"99.5"``)."""
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise InvalidInput(MAX_INTENSITY, f"must be a number >= 0 (gCO2eq/kWh), got {raw!r}")
    return value


def max_clusters(raw: str) -> int:
    """A whole number of clusters >= 1 (``"2"``)."""
    text = raw.strip()
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise InvalidInput(MAX_CLUSTERS, f"must be a whole number >= 1, got {raw!r}")
    return int(text)


DEFAULT_MAX_PAUSE = datetime.timedelta(hours=24)
"""How long a NodePool pause may last without :data:`MAX_PAUSE`."""
LONGEST_MAX_PAUSE = datetime.timedelta(days=7)
_DURATION = re.compile(r"^(?:(\d{1,4})h)?(?:(\d{1,5})m)?$")


def duration(key: str, raw: str, longest: datetime.timedelta) -> datetime.timedelta:
    """The value of ``key``: a duration in hours and/or minutes, > 0 and at most ``longest``
    (``"24h"``, ``"90m"``, ``"1h30m"``)."""
    text = raw.strip()
    match = _DURATION.fullmatch(text) if text.isascii() else None
    value = datetime.timedelta(0)
    if match is not None and text:
        value = datetime.timedelta(hours=int(match[1] or 0), minutes=int(match[2] or 0))
    if not datetime.timedelta(0) < value <= longest:
        hours = int(longest.total_seconds() // 3600)
        raise InvalidInput(
            key, f'must be a duration > 0 up to {hours}h such as "24h" or "90m", got {raw!r}'
        )
    return value


def max_pause(raw: str) -> datetime.timedelta:
    """A duration in hours and/or minutes, > 0 and at most 7 days (``"24h"``, ``"90m"``,
    ``"1h30m"``)."""
    return duration(MAX_PAUSE, raw, LONGEST_MAX_PAUSE)


LONGEST_EXPECTED_RUNTIME = datetime.timedelta(days=30)
LONGEST_MAX_DELAY = datetime.timedelta(days=7)


def expected_runtime(raw: str) -> datetime.timedelta:
    """:data:`EXPECTED_RUNTIME`: a duration > 0 up to 720 hours (``"2h"``, ``"90m"``)."""
    return duration(EXPECTED_RUNTIME, raw, LONGEST_EXPECTED_RUNTIME)


def max_delay(raw: str) -> datetime.timedelta:
    """:data:`MAX_DELAY`: a duration > 0 up to 7 days (``"8h"``, ``"90m"``)."""
    return duration(MAX_DELAY, raw, LONGEST_MAX_DELAY)


_GRID_ZONE_KEY = re.compile(GRID_ZONE_PATTERN)


def zone(raw: str) -> str:
    """A grid zone key (``"SE-SE3"``, ``"DE"``): letters, digits, ``-`` and ``_``."""
    text = raw.strip()
    if not _GRID_ZONE_KEY.fullmatch(text):
        raise InvalidInput(ZONE, f"must be a grid zone key such as DE or US-CAL-CISO, got {raw!r}")
    return text


def intensity_class(raw: str) -> str:
    """``low``, ``medium`` or ``high``."""
    text = raw.strip()
    if text not in INTENSITY_CLASSES:
        raise InvalidInput(INTENSITY_CLASS, f"must be low, medium or high, got {raw!r}")
    return text


_DATE = r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})"
_FRACTION = r"(?:[.,](?P<f>\d+))?"
_RFC3339 = re.compile(
    _DATE
    + r"T(?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})"
    + _FRACTION
    + r"(?:(?P<z>Z)|(?P<sign>[+-])(?P<oh>\d{2}):(?P<om>\d{2}))",
    re.ASCII,
)
"""What Go's ``time.Parse(time.RFC3339, ...)`` accepts (Kubernetes reads every time so):
upper-case ``T`` and ``Z``, seconds, an optional fraction (``.`` or ``,``, any number of
digits) and a zone, ``Z`` or ``+hh:mm``."""
_ISO8601 = re.compile(
    _DATE
    + r"[Tt ](?P<h>\d{2}):(?P<mi>\d{2})(?::(?P<s>\d{2})"
    + _FRACTION
    + r")?(?:(?P<z>[Zz])|(?P<sign>[+-])(?P<oh>\d{2})(?::?(?P<om>\d{2}))?)?",
    re.ASCII,
)
"""The ISO 8601 times providers and their exports write: also a space or ``t`` for ``T``,
no seconds, ``z``, ``+hh``, ``+hhmm``, or no zone at all (UTC)."""


def parse_time(raw: str, *, provider: bool = False) -> datetime.datetime:
    """An RFC 3339 time (``2026-11-23T11:00:00Z``, ``2026-11-23T12:00:00.5+01:00``) read
    as Go reads ``time.RFC3339``, as aware UTC; raises ValueError for anything else
    (out-of-range fields included: month 13, second 60, offset 24:00).

    ``provider``: the laxer ISO 8601 of intensity providers and their CSV exports
    (:data:`_ISO8601`), a time without a zone being UTC. Every time carbonshift reads goes
    through here; it writes them with :func:`format_time`."""
    return _parsed(raw, provider)


@functools.lru_cache(maxsize=512)
def _parsed(raw: str, provider: bool) -> datetime.datetime:
    """:func:`parse_time`, kept for the last few texts: a pass reads the same few times
    on every object (records written by the same decisions). A datetime is immutable and
    its text never changes, so a kept answer is the answer; a text that raises is never
    kept (it raises anew each time)."""
    found = (_ISO8601 if provider else _RFC3339).fullmatch(raw.strip())
    if found is None:
        raise ValueError(f"not an RFC 3339 time: {raw!r}")
    part = found.groupdict()
    hours, minutes = int(part["oh"] or 0), int(part["om"] or 0)
    if hours >= 24 or minutes >= 60:
        raise ValueError(f"time zone offset out of range: {raw!r}")
    offset = datetime.timedelta(hours=hours, minutes=minutes)
    try:
        value = datetime.datetime(
            int(part["y"]),
            int(part["mo"]),
            int(part["d"]),
            int(part["h"]),
            int(part["mi"]),
            int(part["s"] or 0),
            int((part["f"] or "")[:6].ljust(6, "0")),  # Python keeps microseconds
            tzinfo=datetime.timezone(-offset if part["sign"] == "-" else offset),
        )
        return value.astimezone(datetime.UTC)
    except OverflowError:  # year 9999 west of UTC, year 1 east of it
        raise ValueError(f"time out of range: {raw!r}") from None


def timestamp(key: str, raw: str) -> datetime.datetime:
    """The value of ``key``: an RFC 3339 time (:func:`parse_time`), as UTC."""
    try:
        return parse_time(raw)
    except ValueError:
        raise InvalidInput(
            key, f"must be an RFC 3339 time such as 2026-01-01T00:00:00Z, got {raw!r}"
        ) from None


@functools.lru_cache(maxsize=64)
def format_time(at: datetime.datetime) -> str:
    """What :func:`parse_time` reads: RFC 3339 in UTC, whole seconds, ``Z`` (the last
    few kept: a pass writes the same instant into every record it makes)."""
    return at.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def flag(key: str, raw: str) -> bool:
    """``"true"`` or ``"false"`` (any case)."""
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise InvalidInput(key, f'must be "true" or "false", got {raw!r}')
    return text == "true"


def opt_in(labels: Mapping[str, str] | None) -> bool | None:
    """The ``carbonshift.io/enabled`` label of an object or namespace: True (``"true"``),
    False (``"false"``), None (absent or anything else); any case, as :func:`flag` reads.
    The webhook registration's selectors match ``"true"`` exactly, so that is the value
    the README asks for."""
    raw = None if labels is None else labels.get(ENABLED)
    if not isinstance(raw, str):
        return None
    text = raw.strip().lower()
    return True if text == "true" else False if text == "false" else None


def split_strategies(raw: str, known: Sequence[str]) -> tuple[frozenset[str], frozenset[str]]:
    """``(known names, unknown names)`` of a comma list."""
    names = frozenset(s.strip() for s in raw.split(",") if s.strip())
    return names & frozenset(known), names - frozenset(known)


# --- what callers read -----------------------------------------------------------------------


def ours(values: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The ``carbonshift.io/*`` entries of a label or annotation map, sorted: everything
    of the map a decision can depend on."""
    if not values:
        return ()
    return tuple(sorted([kv for kv in values.items() if kv[0].startswith(PREFIX)]))


Warn = Callable[[str], None]


def warning(problem: InvalidInput) -> str:
    """The short admission warning for a malformed value: names the key and the value."""
    text = f"carbonshift: {problem.path} ignored: {problem.message}"
    return text if len(text) <= 119 else text[:118] + "…"


@dataclasses.dataclass(frozen=True, slots=True)
class Knobs:
    """The annotations that steer a decision, parsed. ``None``: absent or malformed."""

    max_intensity: float | None = None
    max_clusters: int | None = None
    strategies: frozenset[str] = frozenset()
    override: bool = False
    max_pause: datetime.timedelta = DEFAULT_MAX_PAUSE
    """NodePools: :data:`MAX_PAUSE` (the default when absent or malformed)."""
    problems: tuple[InvalidInput, ...] = ()
    """Malformed values (each rule left unapplied); :func:`warning` words them."""


_SCOPE_NAMES: Mapping[Scope, str] = {"policy": "policies", "nodepool": "NodePools"}

_ROWS: Mapping[str, Key] = {k.name: k for k in KEYS}
"""The vocabulary's rows by key (:data:`KEYS`, a constant)."""
_VALID: Mapping[Scope, tuple[str, ...]] = {
    scope: tuple(k.name for k in KEYS if scope in k.scopes) for scope in BOTH
}
"""The keys each decision reads, in :data:`KEYS` order (the order difflib weighs them in)."""


class UnknownKey(InvalidInput):
    """A ``carbonshift.io/*`` annotation the decision does not read: unknown (a
    misspelling), or a key of another kind, or a label set as an annotation. Its
    ``path`` is the key; the message names the closest key that is read there."""


def unknown_keys(annotations: Mapping[str, str], scope: Scope) -> list[UnknownKey]:
    """The ``carbonshift.io/*`` annotations a ``scope`` decision would silently ignore,
    each with the closest key it reads (:mod:`difflib`). Keys carbonshift writes
    (``carbonshift.io/decision``, the intensity marks) are never reported."""
    valid = _VALID.get(scope, ())
    out: list[UnknownKey] = []
    for key in sorted(annotations):
        if not key.startswith(PREFIX) or key in valid:
            continue
        row = _ROWS.get(key)
        if row is not None and row.written:
            continue
        closest = difflib.get_close_matches(key, valid, n=1, cutoff=0.0)
        hint = f"did you mean {closest[0]}?" if closest else ""
        if row is None:
            why = "unknown key"
        elif row.kind == "label" and scope in _scopes_of_label(key):
            why, hint = "a label, not an annotation", f"set it as label {key}"
        else:
            why = f"not read on {_SCOPE_NAMES[scope]}"
        out.append(UnknownKey(key, f"{why}; {hint}" if hint else why))
    return out


UNREAD = "keys"
"""Decision record field: the ``carbonshift.io/*`` annotations the decision did not read,
key -> why (:func:`unread`)."""


def unread(annotations: Mapping[str, str], scope: Scope) -> dict[str, str]:
    """The record's :data:`UNREAD` entries: the :class:`UnknownKey` problems of
    :func:`knobs` (the warnings' own path), key -> message."""
    problems = knobs(annotations, scope).problems
    return {p.path: p.message for p in problems if isinstance(p, UnknownKey)}


def _scopes_of_label(key: str) -> tuple[Scope, ...]:
    """The decisions whose objects carry ``key`` as a label (``carbonshift.io/enabled``)."""
    return BOTH if key == ENABLED else ()


def knobs(annotations: Mapping[str, str], scope: Scope) -> Knobs:
    """Parse the annotations a policy or NodePool decision reads; never raises.

    ``problems`` names malformed values and, as :class:`UnknownKey`, every other
    ``carbonshift.io/*`` annotation (:func:`unknown_keys`): one path to the warnings."""
    problems: list[InvalidInput] = []
    known = POLICY_STRATEGIES if scope == "policy" else NODEPOOL_STRATEGIES

    def read(key: str, parse: Callable[[str], object]) -> object:
        raw = annotations.get(key)
        if raw is None:
            return None
        try:
            return parse(raw)
        except InvalidInput as exc:
            problems.append(exc)
            return None

    limit = read(MAX_INTENSITY, max_intensity) if scope == "policy" else None
    count = read(MAX_CLUSTERS, max_clusters) if scope == "policy" else None
    override = read(OVERRIDE, lambda raw: flag(OVERRIDE, raw))
    pause = read(MAX_PAUSE, max_pause) if scope == "nodepool" else None
    names, unknown = split_strategies(annotations.get(STRATEGY, ""), known)
    if scope == "nodepool" and STRATEGY not in annotations:
        names = DEFAULT_NODEPOOL_STRATEGIES
    if unknown:
        problems.append(
            InvalidInput(
                STRATEGY, f"unknown {', '.join(sorted(unknown))} (known: {', '.join(known)})"
            )
        )
    problems.extend(unknown_keys(annotations, scope))
    return Knobs(
        max_intensity=limit if isinstance(limit, float) else None,
        max_clusters=count if isinstance(count, int) else None,
        strategies=names,
        override=override is True,
        max_pause=pause if isinstance(pause, datetime.timedelta) else DEFAULT_MAX_PAUSE,
        problems=tuple(problems),
    )


def limit_of(annotations: Mapping[str, str] | None) -> float | None:
    """``max-intensity`` for the scheduler paths: None when absent; raises
    :class:`InvalidInput` (answered 400) when malformed."""
    raw = annotations.get(MAX_INTENSITY) if annotations else None
    return None if raw is None else max_intensity(raw)
