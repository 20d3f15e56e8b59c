"""The corpus as data: enough objects, each with its upstream source, and the licences."""

from __future__ import annotations

import re

from tests.semantics import fleet


def test_corpus_has_a_hundred_sourced_objects_of_each_handled_kind() -> None:
    samples = fleet.corpus()
    kinds = {s.kind for s in samples}
    assert len(samples) >= 100
    assert kinds == {"PropagationPolicy", "ClusterPropagationPolicy", "NodePool"}
    for s in samples:
        assert re.match(r"https://github.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/", s.source)
        api = s.obj["apiVersion"]
        assert api in ("policy.karmada.io/v1alpha1", "karpenter.sh/v1"), s.id


def test_every_corpus_file_is_listed_with_its_licence() -> None:
    root = fleet.CORPUS
    index = (root / "sources.md").read_text()
    for path in root.glob("*/*.yaml"):
        assert f"`{path.relative_to(root)}`" in index, path
    for name in ("LICENSE", "LICENSE.karmada-website", "NOTICE"):
        assert (root / name).is_file()
    assert "Apache License" in (root / "LICENSE").read_text()
