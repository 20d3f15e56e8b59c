"""Kueue MultiKueue: batch Workloads nominated to the greenest worker (dispatch) and held
by a carbon window admission check until a greener hour."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from webhook.integrations.base import Integration, Run, Wiring
from webhook.kinds import Grant

if TYPE_CHECKING:
    from webhook.controllers.kueue.fleet import KueueController


def _kueue(w: Wiring) -> Sequence[KueueController]:
    from webhook.controllers.kueue.carbon_window import CarbonWindow  # noqa: PLC0415
    from webhook.controllers.kueue.dispatch import KueueDispatcher  # noqa: PLC0415
    from webhook.controllers.kueue.fleet import KueueCaches  # noqa: PLC0415

    f, feed = w.fleet, w.world.feed
    if f.workers is None:
        return []
    caches = KueueCaches()  # one watch per resource, read by both (started with the first)
    # keyed controllers; with dispatch: none the dispatcher only counts who waits
    return [
        KueueDispatcher(f.api, w.config, feed, f.elector, f.workers, events=f.events,
                        caches=caches),
        CarbonWindow(f.api, w.config, feed, f.elector, f.workers, events=f.events,
                     caches=caches),
    ]  # fmt: skip


ROW = Integration(
    "kueue",
    runs=(Run("kueue", _kueue),),
    grants=(
        Grant(
            "kueue.x-k8s.io",
            ("clusterqueues", "admissionchecks", "multikueueclusters"),
            ("get", "list", "watch"),
            "Kueue MultiKueue (docs/kueue.md, kueue.enabled): the manager's queues and checks and "
            "the workers its MultiKueueClusters name (their kubeconfig Secrets: a Role in Kueue's "
            "namespace), followed by watched caches",
        ),
        Grant(
            "kueue.x-k8s.io",
            ("localqueues",),
            ("get", "list"),
            "a Workload's LocalQueue (on the workers, with the credentials Kueue uses)",
        ),
        Grant(
            "kueue.x-k8s.io",
            ("workloads",),
            ("get", "list", "watch", "patch"),
            "the Workloads carbonshift nominates workers for or holds for a carbon window, and "
            "their carbonshift.io/decision annotation (server-side apply, only that key)",
        ),
        Grant(
            "kueue.x-k8s.io",
            ("workloads/status",),
            ("patch",),
            "status.nominatedClusterNames (applied as Kueue's admission, field manager "
            "kueue-admission) and the carbon window's status.admissionChecks entry",
        ),
        Grant(
            "kueue.x-k8s.io",
            ("admissionchecks/status",),
            ("patch",),
            "the carbon window AdmissionChecks' Active condition",
        ),
        Grant(
            "kueue.x-k8s.io",
            ("multikueueconfigs",),
            ("get", "list", "watch", "update"),
            "dispatch: order writes opted-in MultiKueueConfigs' spec.clusters in carbon order, an "
            "update guarded by the resourceVersion it read",
        ),
        Grant(
            "carbonshift.io",
            ("carbonwindows",),
            ("get", "list", "watch"),
            "the carbon window's parameters (CarbonWindow: the default max-delay of a check)",
        ),
        Grant(
            "batch",
            ("jobs",),
            ("get",),
            "the Job owning a Kueue Workload: its carbonshift.io/max-delay and expected-runtime",
        ),
    ),
    events={
        "CarbonDispatched": "Kueue Workload",
        "CarbonWindowPending": "Kueue Workload",
        "CarbonWindowReady": "Kueue Workload",
        "CarbonOrderChanged": "MultiKueueConfig",
    },
)
