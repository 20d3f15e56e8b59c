"""What every technology shares: the leader's re-evaluation of the handled kinds (with the
rebalancer and the carbon price keeper), the carbon accounting, and the Events that
explain each change."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from webhook.integrations.base import Integration, Run, Wiring
from webhook.kinds import Grant

if TYPE_CHECKING:
    from webhook.controllers.runner import KeyedController


def _reevaluate(w: Wiring) -> Sequence[KeyedController[Any]]:
    from webhook.controllers.follower import Follower  # noqa: PLC0415

    f = w.fleet
    follower = Follower(
        f.api, w.config, w.world.context, f.elector, events=f.events,
        outlook=w.world.feed.outlook, spread=w.world.feed.spread,
    )  # fmt: skip
    keepers = [keeper for keep in w.keepers if (keeper := keep(follower, w)) is not None]
    return [follower, *keepers]


def _accounting(w: Wiring) -> Sequence[KeyedController[Any]]:
    from webhook.controllers.accounting import Accountant  # noqa: PLC0415

    f = w.fleet
    return [Accountant(f.api, w.config, w.world.context, f.elector, namespace=w.kube.namespace,
                       accounts=w.accounts)]  # fmt: skip


ROW = Integration(
    "carbonshift",
    runs=(Run("reevaluate", _reevaluate), Run("accounting", _accounting)),
    grants=(
        Grant(
            "events.k8s.io",
            ("events",),
            ("create", "patch"),
            "Events that explain each change: about Clusters and NodePools in default, about "
            "namespaced objects in theirs",
        ),
    ),
)
