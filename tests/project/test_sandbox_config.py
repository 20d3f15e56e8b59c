"""``SANDBOX_CONFIG``: a user's carbonshift config laid over the sandbox's."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.sandbox import Layout, Sandbox, SandboxError
from devtools.sandbox.objects import carbonshift_config, user_config
from webhook.model.validation import InvalidInput


def test_user_sections_win_section_by_section_and_clusters_are_ignored() -> None:
    user = {
        "providers": ["electricitymaps", "static"],
        "feed": {"refresh_seconds": 60},
        "reevaluate": {"enabled": True, "interval_seconds": 120},
        "clusters": {"elsewhere": {"zone": "FR"}},
    }
    merged = user_config(carbonshift_config(), user)
    assert merged["providers"] == ["electricitymaps", "static"]
    assert merged["reevaluate"] == {"enabled": True, "interval_seconds": 120}
    assert merged["feed"] == {"refresh_seconds": 60}
    assert "clusters" not in merged  # members are discovered from their Cluster objects
    assert merged["nodepools"] == carbonshift_config()["nodepools"]  # untouched sections stay


def test_a_bad_user_config_is_refused_naming_the_key() -> None:
    with pytest.raises(InvalidInput, match=r"^feed\.retries: "):
        user_config(carbonshift_config(), {"feed": {"retries": -1}})


def test_the_sandbox_names_the_file_when_it_cannot_use_it(tmp_path: Path) -> None:
    bad = tmp_path / "mine.yaml"
    bad.write_text("feed: {retries: -1}\n")
    box = Sandbox(Layout.default(tmp_path / "state"), user_config=bad, log=lambda _m: None)
    with pytest.raises(SandboxError, match=r"mine\.yaml: feed\.retries: "):
        box._carbonshift_config()
    good = tmp_path / "good.yaml"
    good.write_text("reevaluate: {enabled: true}\n")
    box = Sandbox(Layout.default(tmp_path / "state"), user_config=good, log=lambda _m: None)
    assert box._carbonshift_config()["reevaluate"] == {"enabled": True}


def test_the_sandbox_runs_the_products_defaults_and_the_tests_fleet_is_quiet() -> None:
    product = carbonshift_config()
    assert "labels" not in product  # cluster labels, re-evaluation and move-back: defaults
    assert "reevaluate" not in product
    quiet = carbonshift_config(quiet=True)
    assert quiet["labels"] == {"enabled": False}
    assert quiet["reevaluate"] == {"enabled": False}
