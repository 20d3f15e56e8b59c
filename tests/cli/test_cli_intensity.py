"""``carbonshift intensity``: table, JSON, exit statuses, messages that say what to do."""

from __future__ import annotations

import argparse
import asyncio
import io
from pathlib import Path

import orjson
import pytest

from tests.support import FakeUpstream, Reply
from webhook.cli import intensity as cli_intensity
from webhook.decision import seasonal
from webhook.decision.forecast_quality import Quality
from webhook.feed.judging import PROFILE, Judgement
from webhook.model.config import load


def run(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="carbonshift")
    cli_intensity.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["intensity", *argv])
    out, err = io.StringIO(), io.StringIO()
    status = cli_intensity.run(args, out, err)
    return status, out.getvalue(), err.getvalue()


def test_table_with_static_data() -> None:
    status, out, err = run("DE", "FR")
    assert status == 0, err
    header, de, fr = out.splitlines()
    assert header.split() == ["ZONE", "GCO2EQ/KWH", "SIGNAL", "SOURCE", "AGE", "ESTIMATED", "STALE"]
    assert de.split()[0] == "DE"
    assert "static:" in de
    assert fr.split()[-2:] == ["yes", "no"]
    # The embedded table forecasts nothing and one run holds no past day: no forecaster is
    # judged on any window yet, so no forecasts block (an empty table says nothing).
    assert "Forecasts" not in out
    assert "WINDOWS" not in out


def test_the_embedded_table_answers_with_its_data_set_and_year() -> None:
    """With no key, every answer names Electricity Maps' yearly data set and its year."""
    status, out, err = run("FR", "IN-MH")
    assert status == 0, err
    fr, in_mh = out.splitlines()[1:]
    assert fr.split()[:4] == ["FR", "31.0", "average", "static:electricitymaps-2025-lifecycle"]
    assert in_mh.split()[3] == "static:electricitymaps-2022-lifecycle"  # retired zone
    status, out, err = run("--json", "FR")
    assert status == 0, err
    assert "static:electricitymaps-2025-lifecycle" in out


def test_the_forecasts_block_leaves_out_zones_judged_on_no_window() -> None:
    nothing = Quality(0, 0.0, 0.0, 0.0)
    good = Quality(96, 0.875, 0.8123, 91.0)
    unjudged = Judgement("FR", "static", 12, {PROFILE: nothing, "provider": nothing},
                         {PROFILE: nothing, "provider": nothing}, PROFILE)  # fmt: skip
    judged = Judgement("DE", "electricitymaps", 12, {PROFILE: good, "provider": good},
                       {PROFILE: good, "provider": good}, "provider")  # fmt: skip
    assert cli_intensity.render_forecasts({"FR": unjudged}, "best", 12) == ""
    text = cli_intensity.render_forecasts({"DE": judged, "FR": unjudged}, "best", 12)
    assert [line.split()[0] for line in text.splitlines()[3:]] == ["DE", "DE", "DE"]


def test_forecasts_say_which_forecaster_is_used_and_how_well_each_ranked() -> None:
    good = Quality(96, 0.875, 0.8123, 91.0, 12.34)
    fair = Quality(96, 0.5, 0.4567, 60.0, 20.0)
    judged = Judgement("DE", "electricitymaps", 12, {PROFILE: fair, "provider": good},
                       {PROFILE: fair, "provider": good}, "provider")  # fmt: skip
    text = cli_intensity.render_forecasts({"DE": judged, "XX": None}, "best", 12)
    _, title, _, profile, fitted, provider = text.splitlines()
    assert "best; windows of 12 h ahead" in title
    assert profile.split() == [
        "DE",
        "day-ahead-profile",
        "no",
        "50.0",
        "0.457",
        "60.0",
        "20.0",
        "96",
    ]
    assert provider.split() == [
        "DE", "provider", "(electricitymaps)", "yes", "87.5", "0.812", "91.0", "12.3", "96"
    ]  # fmt: skip
    assert fitted.split() == ["DE", "seasonal", "no", "-", "-", "-", "-", "0"]  # not judged
    # The setting decides unless it is best; none uses no forecast.
    assert cli_intensity.uses(judged, "day-ahead-profile") == PROFILE
    assert cli_intensity.uses(judged, "provider") == "provider"
    assert cli_intensity.uses(judged, "none") is None


def test_forecasts_in_json_and_the_window_option(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("reevaluate: {forecast: best}\n")
    status, out, err = run("DE", "XX", "--json", "--window", "6", "--config", str(config))
    assert status == 1, err
    de, xx = orjson.loads(out)
    assert de["forecast"] == {
        "setting": "best",
        "uses": "day-ahead-profile",  # too little evidence: the default forecaster
        "window_hours": 6,
        "judged_provider": "static",
        "forecasters": {
            name: {
                "windows": 0,
                "top_quarter": None,
                "spearman": None,
                "captured_percent": None,
                "nmae_percent": None,
            }
            for name in ("day-ahead-profile", "seasonal", "provider")
        },
    }
    assert xx["forecast"]["uses"] is None
    for bad in ("0", "49", "two"):
        with pytest.raises(SystemExit):
            run("DE", "--window", bad)


def test_json_and_unknown_zone() -> None:
    status, out, err = run("DE", "XX", "--json")
    assert status == 1
    rows = orjson.loads(out)
    assert [r["zone"] for r in rows] == ["DE", "XX"]
    assert rows[0]["provider"] == "static"
    assert rows[1]["value"] is None
    assert "static" in rows[1]["problems"]
    assert "no data for XX" in err


async def test_fallback_is_explained(fake: FakeUpstream, tmp_path: Path) -> None:
    fake.on("/v3/carbon-intensity/latest", Reply({}, status=401))
    config = tmp_path / "c.yaml"
    config.write_text(
        f"providers: [electricitymaps, static]\n"
        f"electricitymaps: {{url: '{fake.url}/v3', token_file: '{tmp_path / 'token'}'}}\n"
    )
    (tmp_path / "token").write_text("secret-token-value")
    # The CLI runs its own event loop: call it from a worker thread.
    status, out, _err = await asyncio.to_thread(run, "DE", "--config", str(config))
    assert status == 0
    assert "Fallbacks:" in out
    assert "answered 401" in out
    assert "ELECTRICITY_MAPS_API_TOKEN" in out
    assert "secret-token-value" not in out


def test_configuration_problems_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ELECTRICITY_MAPS_API_TOKEN", raising=False)
    monkeypatch.delenv("ELECTRICITY_MAPS_API_TOKEN_FILE", raising=False)
    config = tmp_path / "c.yaml"
    config.write_text("providers: [electricitymaps]\n")
    status, _out, err = run("DE", "--config", str(config), "--json")
    assert status == 2
    assert "ELECTRICITY_MAPS_API_TOKEN" in err
    status, _out, err = run()
    assert status == 2
    assert "no zones" in err


# --- --clusters ----------------------------------------------------------------------------

CLUSTERS_CONFIG = """
clusters:
  member-fr: {zone: FR}
  member-se: {provider: aws, region: eu-north-1}
"""


@pytest.fixture
def no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """No KUBECONFIG and no in-cluster service account: the config is the fleet."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


@pytest.mark.usefixtures("no_cluster")
def test_clusters_without_a_kubeconfig_lists_the_config(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(CLUSTERS_CONFIG)
    status, out, err = run("--clusters", "--config", str(config))
    assert status == 0, err
    header, fr, se = out.splitlines()
    assert header.split()[:3] == ["CLUSTER", "ZONE", "ZONE"]
    assert fr.split()[:3] == ["member-fr", "FR", "config"]
    assert se.split()[:5] == ["member-se", "SE-SE3", "config", "aws", "eu-north-1"]
    assert "static:" in se

    status, out, err = run("--clusters", "--config", str(config), "-o", "json")
    assert status == 0, err
    rows = orjson.loads(out)
    assert [(r["cluster"], r["zone"], r["zone_source"]) for r in rows] == [
        ("member-fr", "FR", "config"),
        ("member-se", "SE-SE3", "config"),
    ]
    assert rows[0]["intensity"]["value"] > 0
    assert rows[0]["ready"] is None


@pytest.mark.usefixtures("no_cluster")
def test_clusters_with_no_fleet_says_what_to_do() -> None:
    status, out, err = run("--clusters")
    assert status == 1
    assert out.splitlines() == [
        "CLUSTER  ZONE  ZONE FROM  PROVIDER  REGION  GCO2EQ/KWH  SOURCE  AGE"
    ]
    assert "--kubeconfig" in err


def test_clusters_with_an_unreadable_kubeconfig_exit_2(tmp_path: Path) -> None:
    status, _out, err = run("--clusters", "--kubeconfig", str(tmp_path / "missing"))
    assert status == 2
    assert "--kubeconfig: cannot load" in err


def cluster_object(
    name: str, labels: dict[str, str] | None = None, **spec: str
) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def test_members_read_cluster_objects_like_the_inventory(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(CLUSTERS_CONFIG + "  member-cfg: {zone: PL}\n")
    cfg = load(config)
    objects = [
        cluster_object("member-aws", provider="aws", region="eu-north-1"),
        cluster_object("member-fr", provider="aws", region="eu-north-1"),  # config zone wins
        cluster_object("member-de", {"carbonshift.io/zone": "DE"}),
        cluster_object("member-mars", provider="aws", region="mars-1"),
        cluster_object("member-bad", provider="nimbus", region="x"),
    ]
    found, skipped = cli_intensity.members(cfg, objects)
    assert [(m.name, m.zone, m.zone_source) for m in found] == [
        ("member-aws", "SE-SE3", "region-table"),
        ("member-cfg", "PL", "config"),
        ("member-de", "DE", "label"),
        ("member-fr", "FR", "config"),
        ("member-mars", None, "unknown"),
        ("member-se", "SE-SE3", "config"),  # config-only: still a member
    ]
    assert list(skipped) == ["member-bad"]
    assert found[0].ready is False


def test_clusters_table_names_unknown_zones() -> None:
    found = [cli_intensity.Member("member-mars", None, "unknown", "aws", "mars-1", True)]
    table = cli_intensity.render_members(found, {})
    assert table.splitlines()[1].split() == [
        "member-mars", "-", "unknown", "aws", "mars-1", "-", "(no", "data)", "-",
    ]  # fmt: skip


def test_forecasts_say_in_one_line_that_the_seasonal_forecaster_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    good = Quality(96, 0.875, 0.8123, 91.0, 12.34)
    judged = Judgement("DE", "static", 12, {PROFILE: good}, {PROFILE: good}, PROFILE)
    assert "not installed" not in cli_intensity.render_forecasts({"DE": judged}, "best", 12)
    monkeypatch.setattr(seasonal, "available", lambda: False)
    text = cli_intensity.render_forecasts({"DE": judged}, "best", 12)
    assert text.splitlines()[-1] == f"seasonal: {seasonal.UNAVAILABLE}"
    assert "pip install 'carbonshift[forecast]'" in text
