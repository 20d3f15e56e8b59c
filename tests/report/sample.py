"""Fixed data for ``carbonshift report`` (no cluster): a ledger, Events and decision
annotations around :data:`NOW`, and the report built from them."""

from __future__ import annotations

import datetime
from typing import Any

from webhook import testing
from webhook.decision.accounting import Totals
from webhook.decision.ledger import Ledger, ObjectTotals
from webhook.decision.record import Record
from webhook.integrations import EVENT_REASONS
from webhook.model.intensity import Signal
from webhook.model.vocabulary import DECISION
from webhook.report import data

NOW = datetime.datetime(2026, 3, 1, 12, tzinfo=datetime.UTC)


def ledger() -> dict[str, str]:
    """Two days of a fleet: web (ordered fill) on green, dirty when green is full; its
    counterfactual is an even split (100 replica-hours on each cluster)."""
    book = Ledger(since=NOW - datetime.timedelta(days=2), last=NOW)
    web = ObjectTotals(
        totals={"average/coefficient": Totals(Signal.AVERAGE, "coefficient", "electricitymaps",
                                              kwh=10.0, grams=500.0, counterfactual_grams=875.0,
                                              hours=48.0)},
        places={"green": {"kwh": 8.0, "g": 200.0, "cf_g": 125.0, "rh": 160.0},
                "dirty": {"kwh": 2.0, "g": 300.0, "cf_g": 750.0, "rh": 40.0}},
    )  # fmt: skip
    pool = ObjectTotals(
        totals={"average/coefficient": Totals(Signal.AVERAGE, "coefficient", "electricitymaps",
                                              kwh=4.0, grams=400.0, counterfactual_grams=400.0,
                                              hours=48.0)},
        places={"eu-north-1a": {"kwh": 4.0, "g": 400.0, "cf_g": 400.0, "rh": 96.0}},
    )  # fmt: skip
    book.objects = {"PropagationPolicy/shop/web": web, "NodePool//batch": pool}
    for h in range(48):
        at = NOW - datetime.timedelta(hours=47 - h)
        point = book.point(at)
        point["i"] = {"green": 40.0 + 20 * (h % 24 > 12), "dirty": 700.0 - 5 * (h % 24)}
        point["r"] = {"green": 4 if h % 24 < 18 else 3, "dirty": 0 if h % 24 < 18 else 1}
        point["g"] = {"average": 500.0 / 48}
        point["c"] = {"average": 875.0 / 48}
    return book.to_data()


def events() -> list[dict[str, Any]]:
    return [
        {
            "reason": "CarbonReplicasMoved",
            "eventTime": "2026-03-01T06:00:00.000000Z",
            "regarding": {"kind": "PropagationPolicy", "namespace": "shop", "name": "web"},
            "note": "moving 1 replicas of Deployment web back to greener clusters (dirty -1, "
            "green +1): expected intensity 700 -> 40 gCO2eq/kWh",
        },
        {  # outside a 1d window
            "reason": "CarbonRebalanced",
            "eventTime": "2026-02-27T06:00:00.000000Z",
            "regarding": {"kind": "PropagationPolicy", "namespace": "shop", "name": "web"},
            "note": "placement switched",
        },
        {"reason": "Scheduled", "eventTime": "2026-03-01T07:00:00Z", "regarding": {}},
    ]


def objects() -> list[dict[str, Any]]:
    record = Record(body={"switches": [
        {"t": "2026-03-01T09:00:00Z", "from": {"dirty": 1}, "to": {"green": 1},
         "before": 700, "after": 40},
    ]})  # fmt: skip
    annotations = {DECISION: record.encode()}
    return [testing.propagation_policy(namespace="shop", annotations=annotations)]


def report(since: str = "1d") -> data.Report:
    return data.build(ledger(), events(), objects(), now=NOW, since=data.duration(since),
                      reasons=EVENT_REASONS)  # fmt: skip
