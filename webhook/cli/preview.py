"""Offline preview: run manifests through the admission path and apply the patches.

``carbonshift mutate`` builds the AdmissionReview the API server would send for a
CREATE, runs it through :func:`webhook.serve.admission.admit` (the webhook's own code path)
and applies the returned JSON Patch, so what it prints is what would be stored. It is a
preview, not something to apply: nothing is sent to a cluster.

The API server calls the webhook for a namespaced object only when its namespace opted in
(the registration's ``namespaceSelector``); the preview applies the same rule
(:func:`webhook.decision.optin.not_opted_in`) to the namespace's labels: those of a
``Namespace`` object in the same input, else those a cluster gives (``--kubeconfig``:
:func:`cluster_namespaces`), else it assumes the namespace opted in and says so in the
object's reason.
``carbonshift mutate --reevaluate`` instead treats each manifest as stored (e.g. from
``kubectl get -o yaml``) and runs the leader's re-evaluation on it
(:class:`webhook.kinds.reevaluation.Reevaluation`, the reconciler's own code), printing what
the leader would write.

Offline, Liqo's remote clusters are the config's ``clusters:`` and the virtual-node
``Node`` objects in the input (:func:`liqo_peers`, read as the live server reads them:
:func:`webhook.decision.liqo.peers.peer`); Kueue objects, which the leader rather than the
webhook decides, go through :mod:`webhook.cli.preview_kueue`. What the answer takes from
the live cluster is said in the preview's notes.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonpatch
import orjson

from webhook import kinds
from webhook.decision.karmada.api import KarmadaApi
from webhook.decision.liqo.peers import Peer, is_virtual, peer, place
from webhook.decision.optin import SELECTED, not_opted_in
from webhook.decision.outcome import Change
from webhook.decision.record import Record, user_fields
from webhook.kinds.reevaluation import Reevaluation, target_of
from webhook.model.config import ClusterConfig, Config
from webhook.model.objects import Obj, items, mapping
from webhook.model.validation import InvalidInput
from webhook.model.vocabulary import BOTH, DECISION, ENABLED, knobs
from webhook.serve import admission, reviews

if TYPE_CHECKING:
    from webhook.cli.preview_kueue import Answer, Offline

Labels = Mapping[str, str]


@dataclasses.dataclass(frozen=True, slots=True)
class Preview:
    """One document's result."""

    stored: Mapping[str, Any]
    outcome: admission.Outcome
    notes: tuple[str, ...] = ()
    """What the preview itself says: what the answer takes from the live cluster."""
    details: tuple[tuple[str, str], ...] = ()
    """``(label, text)`` lines explaining the decision (a Kueue order, window)."""


@dataclasses.dataclass(frozen=True, slots=True)
class LiqoPeers:
    """Liqo's remote clusters offline: the config's clusters and the input's virtual nodes."""

    places: Mapping[str, ClusterConfig]
    """By remote cluster id, as decisions read them."""
    configured: tuple[str, ...]
    """The config's clusters among them (cluster id: the name under ``clusters:``)."""
    nodes: Mapping[str, Peer]
    """The virtual nodes of the input, by node name."""
    problems: Mapping[str, str]
    """Virtual nodes of the input that name no remote cluster, by node name: why."""

    def note(self) -> str:
        """Where the peers came from, for a NamespaceOffloading's note."""
        found = []
        if self.configured:
            found.append(f"the config's clusters ({', '.join(self.configured)})")
        if self.nodes:
            named = ", ".join(f"{n} -> {p.cluster_id}" for n, p in sorted(self.nodes.items()))
            found.append(f"the virtual nodes in the input ({named})")
        which = " and ".join(found) or "none (no clusters: in the config, no virtual node)"
        return (
            f"Liqo peers offline: {which}; depends on the live cluster: the webhook reads "
            "its virtual nodes (Nodes labelled liqo.io/type=virtual-node)"
        )


def liqo_peers(config: Config, documents: Iterable[Mapping[str, Any]]) -> LiqoPeers:
    """The remote clusters a NamespaceOffloading is decided on offline: every cluster of
    the config (its name the cluster id), and every virtual-node ``Node`` of
    ``documents`` read as the live server reads one (:func:`~webhook.decision.liqo.peers.
    peer`: the zone its labels declare, else ``clusters.<cluster id>``, else the region
    table), a virtual node winning over a config entry of the same id."""
    places: dict[str, ClusterConfig] = dict(config.clusters)
    nodes: dict[str, Peer] = {}
    problems: dict[str, str] = {}
    for doc in documents:
        view = Obj(doc)
        if view.api_version != "v1" or view.kind != "Node" or not is_virtual(view.meta.labels):
            continue
        try:
            found = peer(doc, config)
        except InvalidInput as exc:
            problems[view.meta.name] = str(exc)
            continue
        nodes[found.node] = found
        places[found.cluster_id] = place(found)
    return LiqoPeers(places, tuple(config.clusters), nodes, problems)


def _with_peers(
    ctx: kinds.Context, documents: Iterable[Mapping[str, Any]]
) -> tuple[kinds.Context, LiqoPeers]:
    liqo = liqo_peers(ctx.config, documents)
    if ctx.peers is None:
        ctx = dataclasses.replace(ctx, peers=liqo.places)
    return ctx, liqo


def _node(doc: Mapping[str, Any], liqo: LiqoPeers) -> str | None:
    """The reason for a virtual-node Node of the input (None: not one)."""
    name = Obj(doc).meta.name
    if name in liqo.nodes:
        found = liqo.nodes[name]
        zone = f"grid zone {found.grid_zone} ({found.zone_source})" if found.grid_zone else \
            "no grid zone"  # fmt: skip
        return f"Liqo virtual node: remote cluster {found.cluster_id}, {zone}, a peer of the " \
               "input's NamespaceOffloadings"  # fmt: skip
    if name in liqo.problems:
        return f"Liqo virtual node not read as a peer: {liqo.problems[name]}"
    return None


def _kueue(
    doc: Mapping[str, Any], kueue: Offline | None, namespace: Mapping[str, str] | None
) -> Answer | None:
    """The Kueue controllers' answer for ``doc`` (None: not a Kueue object previewed)."""
    if kueue is None:
        return None
    from webhook.cli.preview_kueue import handles  # noqa: PLC0415

    how = handles(doc)
    if how == "order":
        return kueue.order(doc)
    if how == "window":
        return kueue.window(doc, SELECTED if namespace is None else namespace)
    return None


def _not_admitted(
    doc: Mapping[str, Any],
    namespaces: Mapping[str, Labels],
    liqo: LiqoPeers,
    kueue: Offline | None,
    *,
    cluster: bool,
    operation: str = "CREATE",
) -> Preview | None:
    """The preview of a kind the webhook does not admit that the preview still explains:
    a Kueue object (the leader's answer) or a Liqo virtual node (a peer); None: another."""
    view = Obj(doc)
    namespace = view.meta.namespace or "default"
    labels = namespaces.get(namespace)
    answer = _kueue(doc, kueue, labels)
    if answer is not None:
        note = assumed(namespace, cluster=cluster) if labels is None and view.kind == "Job" else ""
        return _answered(answer, view.kind, view.meta.name, operation, note)
    why = _node(doc, liqo) if kueue is None else _node(doc, liqo) or kueue.cluster(doc)
    if why is not None:
        outcome = admission.Outcome(uid="", kind=view.kind, name=view.meta.name,
                                    operation=operation, reason=why)  # fmt: skip
        return Preview(stored=doc, outcome=outcome)
    return None


def _answered(answer: Answer, kind: str, name: str, operation: str, note: str) -> Preview:
    outcome = admission.Outcome(uid="", kind=kind, name=name, operation=operation)
    outcome.result, outcome.reason = answer.result, answer.reason
    if note:
        outcome.reason = f"{outcome.reason}; {note}"
    if answer.decision is not None:
        outcome.decision = orjson.dumps(answer.decision, option=orjson.OPT_SORT_KEYS).decode()
    return Preview(answer.stored, outcome, answer.notes, answer.details)


def review_for(obj: Mapping[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    """The ``request`` part of the AdmissionReview kube-apiserver would send."""
    view = Obj(obj)
    group, kind, meta = view.group, view.kind, view.meta
    row = kinds.find(group, kind)
    namespaced = row.namespaced if row is not None else bool(meta.namespace)
    return {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": view.version, "kind": kind},
        "operation": operation,
        "namespace": (meta.namespace or "default") if namespaced else "",
        "name": meta.raw.get("name", ""),  # as written: the review refuses a wrong type
        "object": obj,
        "oldObject": None,
        "dryRun": True,
    }


def preview(
    documents: Iterable[Mapping[str, Any]],
    ctx: kinds.Context,
    namespaces: Mapping[str, Labels] | None = None,
    kueue: Offline | None = None,
) -> list[Preview]:
    """Admit each document as a CREATE and apply the resulting patch.

    A document the API server would not send (an API version the webhook does not
    register, or a namespaced object whose namespace did not opt in) or could not have
    sent (a malformed object) comes back unchanged with outcome ``ignored``, ``skipped``
    or ``invalid`` and the reason; the others are decided as usual. ``namespaces``: the
    labels of the namespaces a cluster has (``--kubeconfig``); ``Namespace`` objects in
    ``documents`` win over them, as applying them would. Liqo's peers are
    :func:`liqo_peers` unless ``ctx`` knows them; ``kueue``: the Kueue controllers' view
    (:class:`~webhook.cli.preview_kueue.Offline`; None: Kueue objects are not handled).
    """
    documents = list(documents)
    known = _known(documents, namespaces)
    ctx, liqo = _with_peers(ctx, documents)
    cluster = namespaces is not None
    return [_one(doc, ctx, known, liqo, kueue, cluster=cluster) for doc in documents]


def _known(
    documents: Iterable[Mapping[str, Any]], namespaces: Mapping[str, Labels] | None
) -> dict[str, Labels]:
    """The labels of the namespaces a cluster has (``namespaces``; None: no cluster), the
    ``Namespace`` objects among ``documents`` winning over them."""
    known = {} if namespaces is None else dict(namespaces)
    known.update(namespaces_in(documents))
    return known


def namespaces_in(documents: Iterable[Mapping[str, Any]]) -> dict[str, Labels]:
    """The labels of every ``v1`` ``Namespace`` object among ``documents``, by name."""
    found: dict[str, Labels] = {}
    for doc in documents:
        view = Obj(doc)
        if view.api_version == "v1" and view.kind == "Namespace" and view.meta.name:
            found[view.meta.name] = dict(view.meta.labels)
    return found


def assumed(namespace: str, *, cluster: bool) -> str:
    """The reason's note for a namespace whose labels the preview does not know."""
    where = "not in the cluster (--kubeconfig) nor" if cluster else "no --kubeconfig and not"
    return f"assumed namespace {namespace} opted in ({ENABLED}=true): {where} in the input"


def _one(
    doc: Mapping[str, Any],
    ctx: kinds.Context,
    namespaces: Mapping[str, Labels],
    liqo: LiqoPeers,
    kueue: Offline | None,
    *,
    cluster: bool,
) -> Preview:
    request = review_for(doc)
    kind = request["kind"]
    unchanged = admission.Outcome(uid=request["uid"], kind=kind["kind"], name=request["name"])
    row = kinds.find(kind["group"], kind["kind"])
    if row is None and (done := _not_admitted(doc, namespaces, liqo, kueue, cluster=cluster)):
        return done
    if row is not None and row.version != kind["version"]:
        unchanged.reason = f"{doc.get('apiVersion')} is not registered"
        unchanged.warnings = (
            f"carbonshift: {kind['kind']} {doc.get('apiVersion')} is not mutated; "
            f"the webhook handles {row.api_version}",
        )
        return Preview(stored=doc, outcome=unchanged)
    note = ""
    if row is not None and row.namespaced:
        namespace = request["namespace"]
        labels = namespaces.get(namespace)
        if labels is None:
            note = assumed(namespace, cluster=cluster)
        else:
            # kube-apiserver would not call the webhook: the object is stored as written.
            why = not_opted_in(doc, labels)
            if why:
                whose = f": namespace {namespace}" if not_opted_in(doc, SELECTED) is None else ""
                unchanged.result, unchanged.reason = "skipped", why + whose
                return Preview(stored=doc, outcome=unchanged)
    try:
        outcome = admission.admit(reviews.request_of(request), ctx)
    except InvalidInput as exc:
        unchanged.result, unchanged.reason = "invalid", str(exc)
        return Preview(stored=doc, outcome=unchanged)
    stored = copy.deepcopy(dict(doc))
    if outcome.patch:
        stored = jsonpatch.apply_patch(stored, outcome.patch)
    elif not outcome.reason and outcome.result == "unchanged":
        outcome.reason = "nothing to change: the object already is as carbonshift decides"
    if note:
        outcome.reason = f"{outcome.reason}; {note}" if outcome.reason else note
    if row is None and (meant := closest_kind(kind["kind"])):
        outcome.reason = f"{outcome.reason}; did you mean {meant}?"
    notes = (liqo.note(),) if row is not None and row.group == kinds.LIQO else ()
    return Preview(stored=stored, outcome=outcome, notes=notes)


def closest_kind(kind: str) -> str | None:
    """The handled kind ``kind`` is likely a misspelling of (``PropagatonPolicy``:
    PropagationPolicy), None when it is none's (``Deployment``)."""
    handled = {row.kind.lower(): row.kind for row in kinds.KINDS}
    close = difflib.get_close_matches(kind.lower(), sorted(handled), n=1, cutoff=0.85)
    return handled[close[0]] if close and handled[close[0]] != kind else None


async def cluster_namespaces(kubeconfig: str) -> tuple[dict[str, Labels], KarmadaApi | None]:
    """Every namespace of the cluster ``kubeconfig`` names, with its labels (what the
    webhook registration's ``namespaceSelector`` reads), and what its Karmada policy CRDs
    keep (None: not read); raises :class:`~webhook.model.validation.InvalidInput`
    (``--kubeconfig``) for a file that is not there and
    :class:`~webhook.kube.reads.ClusterUnreachable` (one line naming the server) when the
    API server does not answer or refuses the list."""
    from webhook.kube import client, reads  # noqa: PLC0415 - only with a cluster
    from webhook.runtime.tasks import closed  # noqa: PLC0415

    if not Path(kubeconfig).is_file():  # noqa: ASYNC240 - one stat, before connecting
        raise InvalidInput("--kubeconfig", f"cannot load {kubeconfig}: no such file")
    kube = client.settings(kubeconfig, default_namespace="default")
    if kube is None:  # pragma: no cover - a path is always given
        return {}, None
    api = await client.connect(kube)
    try:
        items = await reads.namespaces(api)
        karmada = await reads.karmada_api(api)
    except reads.UNANSWERED as exc:  # unreachable, refused
        raise reads.unreachable(api, exc) from None
    finally:
        await closed(api.close())
    listed = namespaces_in({"apiVersion": "v1", "kind": "Namespace", **item} for item in items)
    return listed, karmada


OPTED_IN = SELECTED
"""The labels a namespaced object's namespace is assumed to carry offline when neither
the input nor a cluster says: a stored object with a decision annotation was admitted in
an opted-in namespace."""


def reevaluate(
    documents: Iterable[Mapping[str, Any]],
    ctx: kinds.Context,
    rules: Reevaluation,
    namespaces: Mapping[str, Labels] | None = None,
    kueue: Offline | None = None,
) -> list[Preview]:
    """Re-evaluate each stored object as the leader would at ``ctx.now``.

    The outcome's ``result`` is the step's (``kept``, ``switched``, ``too_soon``,
    ``stale``, ``user_owned``, ``skipped``; ``ignored`` for kinds not re-evaluated), its
    ``reason`` the step's why, and ``stored`` the object after the leader's write. A
    namespace's labels come from ``Namespace`` objects among ``documents``, else from
    ``namespaces`` (a cluster's), else it is assumed opted in (the reason says so). Liqo
    peers and Kueue objects as :func:`preview` takes them (the leader's Kueue passes are
    re-evaluations already).
    """
    documents = list(documents)
    known = _known(documents, namespaces)
    ctx, liqo = _with_peers(ctx, documents)
    out = []
    for doc in documents:
        view = Obj(doc)
        name, kind = view.meta.name, view.kind
        outcome = admission.Outcome(uid="", kind=kind, name=name, operation="REEVALUATE")
        target = target_of(view.api_version, kind)
        if target is None and (done := _not_admitted(doc, known, liqo, kueue,
                                                      cluster=namespaces is not None,
                                                      operation="REEVALUATE")):  # fmt: skip
            out.append(done)
            continue
        if target is None:
            outcome.reason = f"{doc.get('apiVersion')} {kind} is not re-evaluated"
            if meant := closest_kind(str(kind)):
                outcome.reason += f"; did you mean {meant}?"
            out.append(Preview(stored=doc, outcome=outcome))
            continue
        note, labels = "", None
        if target.row.namespaced:
            namespace = view.meta.namespace or "default"
            labels = known.get(namespace)
            if labels is None:
                note, labels = assumed(namespace, cluster=namespaces is not None), OPTED_IN
        action = rules.decide(target, doc, ctx, labels)
        outcome.result, outcome.reason = action.outcome, action.reason
        if note:
            outcome.reason = f"{outcome.reason}; {note}" if outcome.reason else note
        outcome.decision = _annotation(action.changes)
        notes = (liqo.note(),) if target.row.group == kinds.LIQO else ()
        out.append(Preview(stored=action.applied(doc), outcome=outcome, notes=notes))
    return out


def _annotation(changes: Iterable[Change]) -> str | None:
    found = [c.value for c in changes if c.path == ("metadata", "annotations", DECISION)]
    return str(found[-1]) if found else None


NOTES = (
    "carbonshift: pause: limits.cpu set",
    "carbonshift: pause: limits restored",
    "carbonshift: ladder: limits.cpu",
    "carbonshift: ladder: limits restored",
    "carbonshift: zones: pool narrowed",
    "carbonshift: price: the leader adds",
    "carbonshift: placement kept:",
    "carbonshift: clusterSelector kept:",
    "carbonshift: while limited, urgent pods can land",
    "carbonshift: the greenest term has",
    "carbonshift: every known candidate is above",
    "carbonshift: efficiency: forces",
    "carbonshift: efficiency: to undo",
)
"""Admission warnings that say what carbonshift did rather than what is wrong: the
preview prints them as ``note:``."""
NO_DATA = "carbonshift: no intensity data for "


def said(
    warnings: Iterable[str],
    obj: Mapping[str, Any],
    clusters: Iterable[str],
    reason: str = "",
    decision: str | None = None,
) -> list[tuple[str, str]]:
    """The preview's ``(label, text)`` lines for an outcome's admission warnings:
    ``note`` for what carbonshift did, ``warning`` for what is wrong; in full where
    admission cut one to 120 characters (an annotation's problem, the outcome's
    ``reason``, the clusters without data the ``decision`` record names), and the
    candidate clusters the config does not hold said to be not in the config, not
    without data."""
    annotations = Obj(obj).meta.annotations
    full = [
        f"carbonshift: {p.path} ignored: {p.message}"  # vocabulary.warning, uncut
        for scope in BOTH
        for p in knobs(annotations, scope).problems
    ]
    if reason:
        full.append(f"carbonshift: {reason}")
    if decision:
        facts = Record.decode(decision).clusters
        missing = [n for n, f in sorted(facts.items()) if f.intensity is None]
        if missing:
            full.append(f"{NO_DATA}{', '.join(missing)}")
    known = set(clusters)
    out: list[tuple[str, str]] = []
    for warning in warnings:
        text = warning
        if text.endswith("…"):
            text = next((f for f in full if f.startswith(text[:-1])), text)
        if text.startswith(NO_DATA):
            names = text[len(NO_DATA) :].split(", ")
            absent = [n for n in names if n not in known and not n.endswith("…")]
            if absent:
                out.append(("warning", f"carbonshift: {', '.join(absent)}: not in the config "
                            "(clusters:), so no grid zone or intensity"))  # fmt: skip
                rest = [n for n in names if n not in absent]
                text = f"{NO_DATA}{', '.join(rest)}" if rest else ""
        if text:
            out.append(("note" if text.startswith(NOTES) else "warning", text))
    return out


def notes_and_warnings(result: Preview, clusters: Iterable[str]) -> tuple[list[str], list[str]]:
    """The preview's ``(notes, warnings)`` for one result: :func:`said` of its admission
    warnings, and the preview's own notes after them."""
    o = result.outcome
    labelled = said(o.warnings, result.stored, clusters, o.reason, o.decision)
    notes = [text for label, text in labelled if label == "note"]
    warnings = [text for label, text in labelled if label == "warning"]
    return [*notes, *result.notes], warnings


TIERED = "placement.clusterAffinities"
"""The record key of the field an ordered fill writes its tiers into."""


def fill_lines(decision: str, stored: Mapping[str, Any]) -> list[str]:
    """Comment lines for an ordered fill: its tiers, greenest first, and the room assumed;
    for a policy whose ``clusterAffinities`` the user took over, the order as stored."""
    try:
        parsed = orjson.loads(decision)
    except orjson.JSONDecodeError:
        return []
    clusters = parsed.get("clusters") if isinstance(parsed, dict) else None
    if not isinstance(clusters, dict):
        return []
    record = Record.decode(decision)
    grams = {n: f.intensity for n, f in record.clusters.items()}
    tiers: dict[int, list[str]] = {}
    for name, facts in sorted(record.clusters.items()):
        if facts.tier is not None:
            tiers.setdefault(facts.tier, []).append(_named(name, grams))
    if not tiers:
        return []
    placement = mapping(stored, "spec", "placement")
    held = placement.get("clusterAffinities")
    if TIERED in user_fields(record) or (TIERED in record.own and not record.owns(TIERED, held)):
        return [
            f"#   tiers: {stored_order(placement, grams)} (as stored: the user's "
            "clusterAffinities, edited since carbonshift wrote them; carbonshift's order is "
            "not in force)"
        ]
    order = " -> ".join(", ".join(tiers[k]) for k in sorted(tiers))
    shape, why = parsed.get("shape"), parsed.get("karmada")
    lines = [f"#   tiers: {order}"]
    if shape == "groups":
        lines += [
            f"#   shape: failover groups (clusterAffinities, each adding the next tier): {why}",
            "#   room: Karmada takes the first group whose clusters can hold every replica"
            " (Cluster status.resourceSummary) and divides them by room inside it",
        ]
    else:
        if shape:
            lines.append(f"#   shape: overflow tiers (overflowAffinities): {why}")
        lines.append(
            "#   room: each tier takes what Karmada estimates its clusters can hold when it"
            " schedules (Cluster status.resourceSummary); the rest overflows to the next tier"
        )
    return lines


def _named(name: str, grams: Mapping[str, float | None]) -> str:
    g = grams.get(name)
    return f"{name} {g:g} g" if g is not None else name


def stored_order(placement: Mapping[str, Any], grams: Mapping[str, float | None]) -> str:
    """A policy's placement order as stored: each ``clusterAffinities`` term (and its
    ``overflowAffinities`` tiers) in turn, else its ``clusterAffinity``."""
    terms = [t for t in items(placement, "clusterAffinities") if isinstance(t, Mapping)]
    if not terms:
        single = placement.get("clusterAffinity")
        if isinstance(single, Mapping):
            return _term(single, grams)
        return "no cluster affinity: every cluster Karmada knows"
    steps = []
    for term in terms:
        steps.append(_term(term, grams))
        steps += [_term(t, grams) for t in items(term, "overflowAffinities")
                  if isinstance(t, Mapping)]  # fmt: skip
    return " -> ".join(steps)


def _term(term: Mapping[str, Any], grams: Mapping[str, float | None]) -> str:
    names = [n for n in items(term, "clusterNames") if isinstance(n, str)]
    if names:
        return ", ".join(_named(n, grams) for n in names)
    excluded = [n for n in items(term, "exclude") if isinstance(n, str)]
    label = str(term.get("affinityName") or "any cluster")
    return f"{label} (all but {', '.join(excluded)})" if excluded else label
