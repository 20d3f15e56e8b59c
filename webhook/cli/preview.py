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
(:class:`webhook.kinds.following.Reevaluation`, the reconciler's own code), printing what
the leader would write.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import jsonpatch

from webhook import kinds
from webhook.decision.karmada.api import KarmadaApi
from webhook.decision.optin import SELECTED, not_opted_in
from webhook.decision.outcome import Change
from webhook.kinds.following import Reevaluation, target_of
from webhook.model.objects import Obj
from webhook.model.validation import InvalidInput
from webhook.model.vocabulary import BOTH, DECISION, ENABLED, knobs
from webhook.serve import admission, reviews

Labels = Mapping[str, str]


@dataclasses.dataclass(frozen=True, slots=True)
class Preview:
    """One document's result."""

    stored: Mapping[str, Any]
    outcome: admission.Outcome


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
) -> list[Preview]:
    """Admit each document as a CREATE and apply the resulting patch.

    A document the API server would not send (an API version the webhook does not
    register, or a namespaced object whose namespace did not opt in) or could not have
    sent (a malformed object) comes back unchanged with outcome ``ignored``, ``skipped``
    or ``invalid`` and the reason; the others are decided as usual. ``namespaces``: the
    labels of the namespaces a cluster has (``--kubeconfig``); ``Namespace`` objects in
    ``documents`` win over them, as applying them would.
    """
    documents = list(documents)
    known = _known(documents, namespaces)
    return [_one(doc, ctx, known, cluster=namespaces is not None) for doc in documents]


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
    doc: Mapping[str, Any], ctx: kinds.Context, namespaces: Mapping[str, Labels], *, cluster: bool
) -> Preview:
    request = review_for(doc)
    kind = request["kind"]
    unchanged = admission.Outcome(uid=request["uid"], kind=kind["kind"], name=request["name"])
    row = kinds.find(kind["group"], kind["kind"])
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
    return Preview(stored=stored, outcome=outcome)


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
    (``--kubeconfig``) when the namespaces cannot be listed."""
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
    except Exception as exc:  # unreachable, refused
        raise InvalidInput(
            "--kubeconfig", f"cannot list namespaces via {kubeconfig}: {exc}"[:400]
        ) from None
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
) -> list[Preview]:
    """Re-evaluate each stored object as the leader would at ``ctx.now``.

    The outcome's ``result`` is the step's (``kept``, ``switched``, ``too_soon``,
    ``stale``, ``user_owned``, ``skipped``; ``ignored`` for kinds not re-evaluated), its
    ``reason`` the step's why, and ``stored`` the object after the leader's write. A
    namespace's labels come from ``Namespace`` objects among ``documents``, else from
    ``namespaces`` (a cluster's), else it is assumed opted in (the reason says so).
    """
    documents = list(documents)
    known = _known(documents, namespaces)
    out = []
    for doc in documents:
        view = Obj(doc)
        name, kind = view.meta.name, view.kind
        outcome = admission.Outcome(uid="", kind=kind, name=name, operation="REEVALUATE")
        target = target_of(view.api_version, kind)
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
        out.append(Preview(stored=action.applied(doc), outcome=outcome))
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
    "carbonshift: while limited, urgent pods can land",
    "carbonshift: the greenest term has",
)
"""Admission warnings that say what carbonshift did rather than what is wrong: the
preview prints them as ``note:``."""
NO_DATA = "carbonshift: no intensity data for "


def said(
    warnings: Iterable[str], obj: Mapping[str, Any], clusters: Iterable[str]
) -> list[tuple[str, str]]:
    """The preview's ``(label, text)`` lines for an outcome's admission warnings:
    ``note`` for what carbonshift did, ``warning`` for what is wrong; an annotation's
    problem in full where admission cut it to 120 characters, and the candidate clusters
    the config does not hold said to be not in the config, not without data."""
    annotations = Obj(obj).meta.annotations
    full = [
        f"carbonshift: {p.path} ignored: {p.message}"  # vocabulary.warning, uncut
        for scope in BOTH
        for p in knobs(annotations, scope).problems
    ]
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
