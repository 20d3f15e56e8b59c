"""``carbonshift intensity --clusters`` lists OCM's ManagedClusters as ``ocm/<name>``, each
with its zone and where it came from, read as the leader's scorer reads them."""

from __future__ import annotations

from typing import Any

from webhook.cli import intensity as cli_intensity
from webhook.decision import ocm
from webhook.model.config import parse


def managed(name: str, labels: dict[str, str], claims: dict[str, str] | None = None) -> Any:
    status = {
        "clusterClaims": [{"name": k, "value": v} for k, v in (claims or {}).items()],
        "conditions": [{"type": ocm.AVAILABLE, "status": "True"}],
    }
    return {"metadata": {"name": name, "labels": labels}, "status": status}


def test_managed_clusters_are_members_with_their_zone_source() -> None:
    cfg = parse({"clusters": {"hub-pl": {"zone": "PL"}}})
    hub = [
        managed("hub-se", {"carbonshift.io/zone": "SE-SE3"}),
        managed("hub-fr", {}, {ocm.PLATFORM_CLAIM: "AWS", ocm.REGION_CLAIM: "eu-west-3"}),
        managed("hub-pl", {}),
        managed("hub-nowhere", {}),
        {"metadata": {}},
    ]
    found, skipped = cli_intensity.members(cfg, [], managed=hub)
    assert [(m.name, m.zone, m.zone_source, m.ready) for m in found] == [
        ("ocm/hub-fr", "FR", "region-table", True),
        ("ocm/hub-nowhere", None, "unknown", True),
        ("ocm/hub-pl", "PL", "config", True),  # and not also a config-only member
        ("ocm/hub-se", "SE-SE3", "label", True),
    ]
    assert list(skipped) == ["ocm/?"]
