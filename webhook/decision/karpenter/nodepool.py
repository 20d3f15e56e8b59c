"""Carbon-based requirements for Karpenter NodePools (``karpenter.sh/v1``).

The local grid's intensity (config ``zone``) is classed low / medium / high. Always:
template label ``carbonshift.io/intensity``, from the grid of the pool's own zones when
``nodepools.topology_zones`` maps them (after ``zones`` narrowed them; record ``label``),
else from the local grid. Per ``carbonshift.io/strategy`` (comma
list; absent: ``price``): ``price`` (each instance size's carbon cost added to its
price by NodeOverlays the leader keeps, :mod:`webhook.decision.karpenter.carbonprice`; the pool
itself is not changed), ``efficiency`` (arm64 when high), ``zones`` (greenest topology zones),
``weight`` (``spec.weight`` from greenness), ``pause`` (``limits.cpu: "0"`` when high;
over time by :mod:`webhook.decision.pause`), ``ladder`` (``limits.cpu`` a share of the
user's, by :mod:`webhook.decision.karpenter.ladder`; it replaces ``pause`` when both are listed).
Everything written stays valid under the Karpenter v1 CRD's schema and CEL rules.

Where a rule cannot act without changing what the user asked for (no arm64 instance fits
the pool, ``spec.weight`` set by the user, a static pool, too few zones...) it leaves that
part alone, says so in a warning and lists it under ``left`` ({rule, reason}) in the
decision annotation.

Two entry points: :func:`decide` at admission (CREATE, or UPDATE with a new
``carbonshift.io/refresh``) writes everything; :func:`reevaluate`, for the leader's loop
over stored NodePools, only ever changes ``spec.limits`` and ``spec.weight`` (and the
decision annotation): Karpenter hashes ``spec.template`` for drift, so a template change
would replace every node of the pool.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from webhook.decision import pause
from webhook.decision.karpenter import arm64, ladder
from webhook.decision.outcome import REMOVE, Change, Decision, Lookup, lookup, short
from webhook.decision.ranking import DISTINCT, greenness, intensity_class
from webhook.decision.reason import WEIGHT, WHY
from webhook.decision.record import Record, fingerprint, history, user_view
from webhook.model import vocabulary
from webhook.model.config import NodePoolConfig
from webhook.model.intensity import IntensityTable
from webhook.model.objects import items, mapping, meta_of
from webhook.model.vocabulary import DECISION
from webhook.model.vocabulary import INTENSITY_CLASS as CLASS_LABEL

ARCH = "kubernetes.io/arch"
ZONE = "topology.kubernetes.io/zone"
_ARCH_KEYS = (ARCH, "beta.kubernetes.io/arch")
_ZONE_KEYS = (ZONE, "failure-domain.beta.kubernetes.io/zone")
MAX_REQUIREMENTS = 100
"""Karpenter: requirements plus template labels may not exceed 100."""

NO_ZONE = (
    "the local grid zone is unknown (no node names a region the region table knows and"
    " config zone is not set): NodePools are left alone"
)
ARM64_WARNINGS = (
    "carbonshift: efficiency: forces kubernetes.io/arch In [arm64] (grid high):"
    " new nodes are arm64",
    "carbonshift: efficiency: every image this pool runs must be multi-arch (linux/arm64)",
    "carbonshift: efficiency: to undo, drop efficiency from carbonshift.io/strategy and change"
    " carbonshift.io/refresh",
)
"""What an arm64 requirement added by ``efficiency`` means for the pool's users."""
PRICE_WARNINGS = (
    "carbonshift: price: the leader adds each instance size's carbon cost to its price"
    " (NodeOverlays carbonshift-price-*)",
    "carbonshift: price: Karpenter applies NodeOverlays only with feature gate NodeOverlay=true",
)
"""What strategy ``price`` does: the pool itself is left as it is."""
LABEL = "label"
"""Record field: the grid of the pool's own zones the template label was decided on
(``zone``, ``g``, ``class``, the topology zones it came ``from``); absent: the local grid."""
_SPEC = "spec."
_TEMPLATE = "template."
Warn = Callable[[str], None]


@dataclasses.dataclass(frozen=True, slots=True)
class NodePoolInputs:
    """Everything a NodePool decision depends on besides the object itself."""

    zone: str | None
    table: IntensityTable
    settings: NodePoolConfig = NodePoolConfig()
    outlook: Sequence[float] | None = None
    """The local zone's ``[now, now+1 h, ...]`` (``IntensityFeed.outlook``); None: no
    forecast. Read only by the pause over time (``now`` set)."""
    now: datetime | None = None
    """When the decision is made. None: the pause follows the class alone and records no
    start (admission today)."""
    other_pools: Sequence[str] | None = None
    """The other NodePools the server knows of (Karpenter falls through pools by weight:
    where urgent pods can still land while this one is paused); None: none known."""


def decide(nodepool: Mapping[str, Any], inputs: NodePoolInputs) -> Decision:
    """Decide the carbon label and strategies for a NodePool object."""
    annotations, decision, knobs = _begin(nodepool)
    warn = decision.warnings.append
    if not inputs.zone:
        decision.skipped = NO_ZONE
        warn(short(f"carbonshift: {decision.skipped}"))
        return decision
    data = lookup({"local": inputs.zone}, inputs.table)
    intensity = data.values["local"]
    if intensity is None:
        decision.skipped = f"no intensity data for zone {inputs.zone}"
        warn(f"carbonshift: {decision.skipped}")
        return decision
    decision.warnings.extend(data.warnings())

    s = inputs.settings
    level = intensity_class(intensity, low_below=s.low_below, high_from=s.high_from)
    plan = _Plan.start(nodepool, Record.decode(annotations.get(DECISION)), warn)
    override, strategies = knobs.override, knobs.strategies
    if "efficiency" in strategies and level == "high":
        plan.prefer_arm64()
    if "zones" in strategies:
        plan.keep_greenest_zones(s.topology_zones, inputs.table, s.min_zones)
    if "weight" in strategies:
        plan.set_weight(max(1, greenness(intensity)), override)
    if "price" in strategies:
        decision.warnings.extend(PRICE_WARNINGS)
    body = _body(data, level)
    if "ladder" in strategies:
        now = inputs.now
        body.update(_ladder(plan, nodepool, inputs, now=now, level=level, intensity=intensity))
    elif "pause" in strategies and inputs.now is not None:
        body.update(
            _pause_over_time(
                plan, inputs, now=inputs.now, level=level, intensity=intensity, knobs=knobs
            )
        )
    elif "pause" in strategies and pauses(level):
        plan.pause(f"{inputs.zone} is at {intensity:.0f} g/kWh, high from {s.high_from:g}")

    if plan.left:
        body["left"] = plan.left
    label = _own_grid(plan.requirements, s.topology_zones, inputs.table)
    if label is not None:
        label["class"] = intensity_class(label["g"], low_below=s.low_below, high_from=s.high_from)
        body[LABEL] = label
    decision.record = plan.record(body)
    _elsewhere(decision, inputs)
    decision.changes = plan.changes(level if label is None else label["class"])
    return decision


def _own_grid(
    requirements: list[Any], topology: Mapping[str, str], table: IntensityTable
) -> dict[str, Any] | None:
    """Where the template label comes from when the pool's own zones are known: the grid
    of the zones it can launch in (its requirements as carbonshift narrowed them) that
    ``nodepools.topology_zones`` maps and that have data, the dirtiest when they differ
    (the label promises at most that class); None: the local grid labels it."""
    known = _allowed_zones(requirements, topology, table)
    if not known:
        return None
    dirtiest = max(known, key=lambda z: (known[z], z))
    return {"zone": topology[dirtiest], "g": round(known[dirtiest], 1), "from": sorted(known)}


def reevaluate(nodepool: Mapping[str, Any], inputs: NodePoolInputs, now: datetime) -> Decision:
    """Re-decide a stored NodePool over time: pause or resume it and update its weight.

    Only ``spec.limits`` and ``spec.weight`` change (Karpenter does not hash them for
    drift), plus the decision annotation (``decision.record``); the template, its
    requirements and its intensity label stay as written at creation or the last
    refresh, and their ownership entries are carried over. Without intensity data the
    weight stays and a pause still ends at ``max-pause``. No changes: nothing to write.
    """
    annotations, decision, knobs = _begin(nodepool)
    warn = decision.warnings.append
    if not inputs.zone:
        decision.skipped = NO_ZONE
        return decision
    previous = Record.decode(annotations.get(DECISION))
    plan = _Plan.start(nodepool, previous, warn)
    data = lookup({"local": inputs.zone}, inputs.table)
    intensity = data.values["local"]
    s = inputs.settings
    level: str | None = None
    if intensity is None:
        body: dict[str, Any] = {"zone": inputs.zone, "g": None}
        if "weight" in knobs.strategies and previous.owns(
            _SPEC + "weight", plan.spec.get("weight")
        ):
            plan.new_spec["weight"] = plan.spec["weight"]  # no data: the weight stays
            held = plan.spec["weight"]
            plan.weight = held if isinstance(held, int) and not isinstance(held, bool) else None
    else:
        level = intensity_class(intensity, low_below=s.low_below, high_from=s.high_from)
        body = _body(data, level)
        decision.warnings.extend(data.warnings())
        if "weight" in knobs.strategies:
            plan.set_weight(max(1, greenness(intensity)), knobs.override)
    if "ladder" in knobs.strategies:
        body.update(_ladder(plan, nodepool, inputs, now=now, level=level, intensity=intensity))
    elif "pause" in knobs.strategies:
        body.update(
            _pause_over_time(plan, inputs, now=now, level=level, intensity=intensity, knobs=knobs)
        )
    if isinstance(previous.body.get(LABEL), dict):  # the template label stays: so does why
        body[LABEL] = previous.body[LABEL]
    if unread := vocabulary.unread(annotations, "nodepool"):  # as admission records them
        body[vocabulary.UNREAD] = unread
    kept = previous.left
    left = [x for x in kept if x.get("rule") not in ("weight", "pause", "ladder")] + plan.left
    if left:
        body["left"] = left
    record = plan.record(body, template=False)
    for key in previous.own:
        if key.startswith(_TEMPLATE):  # the template is left as it is: so is its ownership
            record.own[key] = previous.own[key]
            record.orig[key] = previous.orig.get(key)
    decision.record = record
    decision.changes = plan.spec_changes()
    _elsewhere(decision, inputs)
    return decision


def _elsewhere(decision: Decision, inputs: NodePoolInputs) -> None:
    """While the pool is held below its limits, say where urgent pods can still go."""
    if decision.record is None or not decision.record.paused:
        return
    others = sorted(inputs.other_pools or ())
    if not others:
        decision.warnings.append(
            "carbonshift: while limited, pending pods wait: carbonshift knows no other NodePool"
        )
        return
    names = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
    decision.warnings.append(
        short(
            f"carbonshift: while limited, urgent pods can land on NodePools {names}"
            " (Karpenter tries pools by weight)"
        )
    )


def _pause_over_time(
    plan: _Plan,
    inputs: NodePoolInputs,
    *,
    now: datetime,
    level: str | None,
    intensity: float | None,
    knobs: vocabulary.Knobs,
) -> dict[str, str]:
    """Apply :func:`webhook.decision.pause.step` to ``plan``; the record body's entries."""
    if plan.static:
        plan.pause("")  # leaves it alone, and says why
        return {}
    previous = pause.State.of(plan.previous.body)
    if not plan.previous.owns(_SPEC + "limits", plan.spec.get("limits")):
        # Not paused by carbonshift (any more): someone else's limits are the user's.
        previous = dataclasses.replace(previous, paused_at=None)
    elif previous.paused_at is None and plan.previous.paused:
        # Paused without a start (admission): it began with the reading it was based on.
        began = pause.State.of({pause.PAUSED_AT: plan.previous.at}).paused_at
        previous = dataclasses.replace(previous, paused_at=began or now)
    step = pause.step(level, inputs.outlook, previous, now, knobs.max_pause)
    if step.paused:
        g = f"{intensity:.0f}" if intensity is not None else "?"
        plan.pause(f"{inputs.zone} is at {g} g/kWh: {step.why}")
    elif step.changed:
        plan.warn(short(f"carbonshift: pause: limits restored: {step.why}"))
    return step.state.body()


def _ladder(
    plan: _Plan,
    nodepool: Mapping[str, Any],
    inputs: NodePoolInputs,
    *,
    now: datetime | None,
    level: str | None,
    intensity: float | None,
) -> dict[str, Any]:
    """Apply :func:`webhook.decision.karpenter.ladder.step` to ``plan``; the record body's entries.

    ``now`` None (admission): the step by the class alone, with no state recorded."""
    steps = inputs.settings.ladder
    if plan.static:
        plan.leave("ladder", "a static NodePool (spec.replicas) has no limits to step")
        return {}
    knobs = vocabulary.knobs(meta_of(nodepool).annotations, "nodepool")
    if now is None:
        if level is None:  # pragma: no cover - admission always has a reading here
            return {}
        share = steps[ladder.target(level, None, 0, steps)]
        if share < 1.0:
            plan.step_limits(share, ladder.usage(nodepool), f"{inputs.zone} is {level}")
        return {ladder.STEP: share} if share < 1.0 else {}
    previous = ladder.State.of(plan.previous.body)
    if not plan.previous.owns(_SPEC + "limits", plan.spec.get("limits")):
        previous = ladder.State(times=dataclasses.replace(previous.times, paused_at=None))
    elif previous.times.paused_at is None and plan.previous.paused:
        # Stepped down without a start (admission): from the reading it was based on.
        began = pause.State.of({pause.PAUSED_AT: plan.previous.at}).paused_at
        times = dataclasses.replace(previous.times, paused_at=began or now)
        previous = ladder.State.of({**times.body(), **_kept_step(plan.previous.body)})
    step = ladder.step(level, inputs.outlook, previous, now, knobs.max_pause, steps)
    if step.share < 1.0:
        g = f"{intensity:.0f}" if intensity is not None else "?"
        plan.step_limits(
            step.share, ladder.usage(nodepool), f"{inputs.zone} at {g} g/kWh: {step.why}"
        )
    elif step.changed:
        plan.warn(short(f"carbonshift: ladder: limits restored: {step.why}"))
    return step.state.body()


def _kept_step(body: Mapping[str, Any]) -> dict[str, Any]:
    return {ladder.STEP: body[ladder.STEP]} if ladder.STEP in body else {}


def pauses(level: str) -> bool:
    """The pause rule (strategy ``pause``): no new nodes while the grid's class is high.

    The simulator's class-based pause policy decides through this function too.
    """
    return level == "high"


@dataclasses.dataclass(slots=True)
class _Plan:
    """The NodePool as the user wrote it, and what carbonshift changes in it."""

    spec: Mapping[str, Any]
    template_spec: Mapping[str, Any]
    labels: Mapping[str, str]
    base_spec: dict[str, Any]
    base_template: dict[str, Any]
    new_spec: dict[str, Any]
    requirements: list[Any]
    warn: Warn
    previous: Record
    left: list[dict[str, str]] = dataclasses.field(default_factory=list)
    """What a rule left alone and why (the record's ``left``)."""
    weight: int | None = None
    """The ``spec.weight`` strategy ``weight`` wrote (the record's ``weight``)."""
    why: str | None = None
    """Why the pool's limits are held below the user's (the record's ``why``)."""

    @classmethod
    def start(cls, nodepool: Mapping[str, Any], previous: Record, warn: Warn) -> _Plan:
        spec = mapping(nodepool, "spec")
        template_spec = mapping(spec, "template", "spec")
        base_spec = user_view(spec, previous, _SPEC)
        base_template = user_view(template_spec, previous, _TEMPLATE)
        return cls(
            spec=spec,
            template_spec=template_spec,
            labels=meta_of(spec.get("template")).labels,
            base_spec=base_spec,
            base_template=base_template,
            new_spec=dict(base_spec),
            requirements=list(items(base_template, "requirements")),
            warn=warn,
            previous=previous,
        )

    @property
    def static(self) -> bool:
        return self.base_spec.get("replicas") is not None

    def leave(self, rule: str, reason: str) -> None:
        """Leave ``rule``'s part of the pool as the user wrote it, and say why."""
        self.left.append({"rule": rule, "reason": reason})
        self.warn(short(f"carbonshift: {rule} left alone: {reason}"))

    def _add_requirement(self, requirement: dict[str, Any], rule: str) -> bool:
        if requirement in self.requirements:
            return False
        used = len(self.requirements) + len(set(self.labels) | {CLASS_LABEL})
        if used >= MAX_REQUIREMENTS:
            self.leave(rule, f"the NodePool already has {MAX_REQUIREMENTS} requirements and labels")
            return False
        self.requirements.append(requirement)
        return True

    def prefer_arm64(self) -> None:
        reason = arm64.why_not({**self.base_template, "requirements": self.requirements})
        if reason is not None:
            self.leave("efficiency", reason)
            return
        if any(_arm64_only(r) for r in self.requirements):
            return  # the user already asks for arm64 only
        arm = {"key": ARCH, "operator": "In", "values": ["arm64"]}
        if self._add_requirement(arm, "efficiency"):
            for line in ARM64_WARNINGS:
                self.warn(line)

    def keep_greenest_zones(
        self, topology: Mapping[str, str], table: IntensityTable, min_zones: int
    ) -> None:
        if not topology:
            self.leave("zones", "config nodepools.topology_zones is empty")
            return
        known = _allowed_zones(self.requirements, topology, table)
        if len(known) < 2:
            reason = "the pool allows no zone of" if not known else "the pool allows one zone of"
            self.leave("zones", f"{reason} nodepools.topology_zones with intensity data")
            return
        greenest = _greenest(known, min_zones)
        if len(greenest) >= len(known):
            if len(_greenest(known, 1)) < len(known):
                self.leave(
                    "zones", f"kept all {len(known)} zones (nodepools.min_zones is {min_zones})"
                )
            return
        requirement = {"key": ZONE, "operator": "In", "values": greenest}
        if self._add_requirement(requirement, "zones"):
            self.warn(
                short(
                    f"carbonshift: zones: pool narrowed to the {len(greenest)} greenest of "
                    f"{len(known)} zones ({', '.join(greenest)})"
                )
            )

    def set_weight(self, weight: int, override: bool) -> None:
        if self.static:
            self.leave("weight", "a static NodePool (spec.replicas) takes no weight")
        elif self.base_spec.get("weight") is not None and not override:
            self.leave("weight", "spec.weight is the user's (carbonshift.io/override replaces it)")
        else:
            self.new_spec["weight"] = weight
            self.weight = weight

    def pause(self, why: str) -> None:
        if self.static:
            self.leave("pause", "a static NodePool (spec.replicas) cannot be paused by limits")
        else:
            limits = self.base_spec.get("limits")
            # Only cpu goes to "0" (enough to stop new nodes); the user's other limits stay.
            self.new_spec["limits"] = {**(limits if isinstance(limits, dict) else {}), "cpu": "0"}
            self.why = why or None
            self.warn(short(f'carbonshift: pause: limits.cpu set to "0", no new nodes: {why}'))

    def step_limits(self, share: float, used: object, why: str) -> None:
        """``limits.cpu`` at ``share`` of the user's (never below ``used``); the pool's
        other limits stay. Without a user cpu limit only the 0 step applies."""
        limits = self.base_spec.get("limits")
        limits = limits if isinstance(limits, dict) else {}
        cpu = ladder.limit(limits.get("cpu"), share, used)
        if cpu is None:
            self.leave(
                "ladder",
                f"no spec.limits.cpu to keep {share:.0%} of: the pool stays unlimited"
                ' (only the 0 % step applies, as limits.cpu "0")',
            )
            return
        self.new_spec["limits"] = {**limits, "cpu": cpu}
        self.why = why or None
        user = limits.get("cpu")
        of = f"{share:.0%} of {user}" if user is not None else "no new nodes"
        floor = ", what the pool uses" if cpu != ladder.limit(user, share, None) else ""
        self.warn(short(f'carbonshift: ladder: limits.cpu "{cpu}" ({of}{floor}): {why}'))

    def _new_template(self) -> dict[str, Any]:
        new = dict(self.base_template)
        if self.requirements != list(items(self.base_template, "requirements")):
            new["requirements"] = self.requirements
        return new

    def record(self, body: dict[str, Any], *, template: bool = True) -> Record:
        body.update(history(self.previous))
        record = Record(body=body)
        _own(record, _SPEC, self.base_spec, self.new_spec, ("weight", "limits"))
        if template:
            _own(record, _TEMPLATE, self.base_template, self._new_template(), ("requirements",))
        if self.new_spec.get("limits") != self.base_spec.get("limits"):
            body["paused"] = True
            if self.why:
                body[WHY] = self.why
        if self.weight is not None and self.new_spec.get("weight") != self.base_spec.get("weight"):
            body[WEIGHT] = self.weight
        return record

    def changes(self, level: str) -> list[Change]:
        changes = []
        if self.labels.get(CLASS_LABEL) != level:
            changes.append(Change(("spec", "template", "metadata", "labels", CLASS_LABEL), level))
        changes.extend(self.spec_changes())
        new_requirements = self._new_template().get("requirements", [])
        if self.template_spec.get("requirements") != new_requirements:
            changes.append(Change(("spec", "template", "spec", "requirements"), new_requirements))
        return changes

    def spec_changes(self) -> list[Change]:
        """``spec.weight`` and ``spec.limits``: the fields Karpenter does not hash for drift."""
        return [
            Change(("spec", field), self.new_spec.get(field, REMOVE))
            for field in ("weight", "limits")
            if self.spec.get(field) != self.new_spec.get(field)
        ]


def _arm64_only(requirement: object) -> bool:
    return (
        isinstance(requirement, dict)
        and requirement.get("key") in _ARCH_KEYS
        and requirement.get("operator") == "In"
        and requirement.get("values") == ["arm64"]
    )


def _allowed_zones(
    requirements: list[Any], topology: Mapping[str, str], table: IntensityTable
) -> dict[str, float]:
    """The user's allowed topology zones with intensity data -> intensity."""
    allowed = set(topology)
    for r in requirements:
        if not isinstance(r, dict) or r.get("key") not in _ZONE_KEYS:
            continue
        values = set(items(r, "values"))
        if r.get("operator") == "In":
            allowed &= values
        elif r.get("operator") == "NotIn":
            allowed -= values
    known: dict[str, float] = {}
    for z in allowed:
        reading = table.get(topology[z])
        if reading is not None:
            known[z] = reading.value
    return known


def _greenest(known: Mapping[str, float], min_zones: int) -> list[str]:
    """The greenest N zones, N = max(min_zones, zones within 10% of the greenest), sorted."""
    if not known:
        return []
    lowest = min(known.values())
    close = sum(1 for v in known.values() if v < lowest * DISTINCT)
    ranked = sorted(known, key=lambda z: (known[z], z))
    return sorted(ranked[: max(min_zones, close)])


def _body(data: Lookup, level: str) -> dict[str, Any]:
    body = data.body()
    local = body.pop("clusters")["local"]
    return {**body, "zone": local["zone"], "g": local["g"], "class": level}


def _own(
    record: Record,
    prefix: str,
    base: Mapping[str, Any],
    new: Mapping[str, Any],
    fields: tuple[str, ...],
) -> None:
    for field in fields:
        if base.get(field) != new.get(field):
            record.orig[prefix + field] = base.get(field)
            record.own[prefix + field] = fingerprint(new.get(field))


def _begin(nodepool: Mapping[str, Any]) -> tuple[Mapping[str, str], Decision, vocabulary.Knobs]:
    """The NodePool's annotations, a fresh decision warning about malformed ones, and the
    settings they carry."""
    annotations = meta_of(nodepool).annotations
    decision = Decision()
    knobs = vocabulary.knobs(annotations, "nodepool")
    decision.warnings.extend(vocabulary.warning(p) for p in knobs.problems)
    return annotations, decision, knobs
