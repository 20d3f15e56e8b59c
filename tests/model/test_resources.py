"""API coordinates: one value for a resource's group, version, plural and kind."""

from __future__ import annotations

from webhook import kinds
from webhook.decision.karmada.bindings import BINDINGS, CLUSTERS
from webhook.model.resources import Resource


def test_a_resource_names_itself_as_rbac_and_the_api_do() -> None:
    assert CLUSTERS.api_version == "cluster.karmada.io/v1alpha1"
    assert CLUSTERS.name == str(CLUSTERS) == "clusters.cluster.karmada.io"
    nodes = Resource("", "v1", "nodes", "Node")
    assert (nodes.api_version, nodes.name) == ("v1", "nodes")
    assert [b.kind for b in BINDINGS] == ["ResourceBinding", "ClusterResourceBinding"]


def test_every_handled_kind_has_its_coordinates() -> None:
    for row in kinds.REGISTRY:
        assert row.api == Resource(row.group, row.version, row.resource, row.kind)
        assert row.api.api_version == row.api_version
