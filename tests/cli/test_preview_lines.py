"""What ``carbonshift mutate`` says above each object: ``note:`` for what carbonshift did,
``warning:`` for what is wrong, an annotation's problem in full (admission cuts its
warnings to 120 characters, the preview does not), and a candidate cluster the config
does not hold said to be not in the config rather than without data."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
import yaml

from webhook import testing
from webhook.cli import main
from webhook.cli.preview import said

POLICY = """\
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: web, namespace: shop}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
  placement:
    clusterAffinity: {clusterNames: [member-ca, member-gb, member-xx]}
    replicaScheduling: {replicaSchedulingType: Divided}
"""


def _comments(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    text: str,
    config: str = "config/example.yaml",
) -> list[str]:
    manifest = tmp_path / "in.yaml"
    manifest.write_text(text)
    assert main(["mutate", "-f", str(manifest), "--config", config]) == 0
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("#   ")]


def test_a_paused_pool_gets_notes_and_its_strategy_problem_in_full(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = Path("examples/40-nodepool.yaml").read_text()
    text = text.replace("carbonshift.io/strategy: weight", 'carbonshift.io/strategy: "pause,lader"')
    # DE (342 g/kWh in Electricity Maps 2025) is medium: put the pool's zones on a grid the
    # embedded table calls high (PL, 565), where the pause applies at admission.
    config = Path("config/example.yaml").read_text().replace(": DE\n", ": PL\n")
    (tmp_path / "high.yaml").write_text(config)
    lines = _comments(tmp_path, capsys, text, str(tmp_path / "high.yaml"))
    assert (
        "#   warning: carbonshift: carbonshift.io/strategy ignored: unknown lader (known: price, "
        "efficiency, zones, weight, pause, ladder, none)"
    ) in lines
    assert any(line.startswith('#   note: carbonshift: pause: limits.cpu set to "0"')
               for line in lines)  # fmt: skip
    assert not any("…" in line for line in lines)


def test_a_cluster_the_config_does_not_hold_is_said_to_be_not_in_the_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _comments(tmp_path, capsys, POLICY)
    assert (
        "#   warning: carbonshift: member-xx: not in the config (clusters:), so no grid zone "
        "or intensity"
    ) in lines
    assert not any("no intensity data" in line for line in lines)


def test_labels_of_each_kind_of_admission_warning() -> None:
    pool = testing.nodepool()
    got = said(
        [
            "carbonshift: no intensity data for member-de, member-xx",
            "carbonshift: placement kept: new one is not 10% greener",
            'carbonshift: ladder: limits.cpu "50" (half of 100): DE is at 482 g/kWh',
            "carbonshift: while limited, pending pods wait: carbonshift knows no other NodePool",
            "carbonshift: zones left alone: config nodepools.topology_zones is empty",
        ],
        pool,
        ["member-de"],
    )
    assert got == [
        ("warning", "carbonshift: member-xx: not in the config (clusters:), so no grid zone "
                    "or intensity"),
        ("warning", "carbonshift: no intensity data for member-de"),
        ("note", "carbonshift: placement kept: new one is not 10% greener"),
        ("note", "carbonshift: ladder: limits.cpu \"50\" (half of 100): DE is at 482 g/kWh"),
        ("warning", "carbonshift: while limited, pending pods wait: carbonshift knows no "
                    "other NodePool"),
        ("warning", "carbonshift: zones left alone: config nodepools.topology_zones is empty"),
    ]  # fmt: skip


WEB = Path("examples/10-web.yaml").read_text().split("---\n")[-1]


def test_a_policy_the_user_took_over_shows_the_order_as_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "web.yaml"
    manifest.write_text(WEB)
    assert main(["mutate", "-f", str(manifest), "--config", "config/example.yaml"]) == 0
    stored = yaml.safe_load(capsys.readouterr().out)
    stored["spec"]["placement"]["clusterAffinities"] = [  # kubectl edit: the user's order
        {"affinityName": "mine", "clusterNames": ["member-us"]},
        {"affinityName": "more", "clusterNames": ["member-us", "member-de"]},
    ]
    manifest.write_text(yaml.safe_dump(stored))
    args = ["mutate", "--reevaluate", "-f", str(manifest), "--config", "config/example.yaml"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "# carbonshift: PropagationPolicy web: user_owned\n" in out
    (tiers,) = [line for line in out.splitlines() if line.startswith("#   tiers: ")]
    assert re.fullmatch(
        r"#   tiers: member-us [\d.]+ g -> member-us [\d.]+ g, member-de [\d.]+ g \(as stored: "
        r"the user's clusterAffinities, edited since carbonshift wrote them; carbonshift's "
        r"order is not in force\)",
        tiers,
    ), tiers
    assert "member-ca" not in tiers
    assert "#   shape: " not in out  # carbonshift's shape is not the stored one


def test_json_output_keeps_notes_apart_from_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = Path("examples/40-nodepool.yaml").read_text()
    text = text.replace("carbonshift.io/strategy: weight", 'carbonshift.io/strategy: "pause,lader"')
    manifest, config = tmp_path / "in.yaml", tmp_path / "c.yaml"
    manifest.write_text(text)
    config.write_text("zone: PL\nnodepools: {topology_zones: {eu-central-1a: PL}}\n")
    args = ["mutate", "-f", str(manifest), "--config", str(config), "-o", "json"]
    assert main(args) == 0
    (pool,) = [
        r for r in orjson.loads(capsys.readouterr().out) if r["object"]["kind"] == "NodePool"
    ]
    assert (
        "carbonshift: carbonshift.io/strategy ignored: unknown lader (known: price, "
        "efficiency, zones, weight, pause, ladder, none)"
    ) in pool["warnings"]  # in full, never cut off with "…"
    assert any(n.startswith('carbonshift: pause: limits.cpu set to "0"') for n in pool["notes"])
    assert not any(n.startswith("carbonshift: pause:") for n in pool["warnings"])


def test_json_output_says_a_cluster_is_not_in_the_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "in.yaml"
    manifest.write_text(POLICY)
    args = ["mutate", "-f", str(manifest), "--config", "config/example.yaml", "-o", "json"]
    assert main(args) == 0
    (result,) = orjson.loads(capsys.readouterr().out)
    assert result["warnings"] == [
        "carbonshift: member-xx: not in the config (clusters:), so no grid zone or intensity"
    ]


def test_what_carbonshift_kept_or_chose_is_a_note() -> None:
    got = said(
        [
            "carbonshift: clusterSelector kept: new one is not 5% greener",
            "carbonshift: every known candidate is above 50 gCO2eq/kWh; keeping member-fr",
            "carbonshift: efficiency: forces kubernetes.io/arch In [arm64] (grid high): new "
            "nodes are arm64",
            "carbonshift: efficiency: every image this pool runs must be multi-arch (linux/arm64)",
        ],
        testing.nodepool(),
        [],
    )
    assert [label for label, _ in got] == ["note", "note", "note", "warning"]


def test_a_warning_admission_cut_short_is_printed_in_full(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest, config = tmp_path / "in.yaml", tmp_path / "c.yaml"
    manifest.write_text(Path("examples/40-nodepool.yaml").read_text())
    config.write_text("providers: [static]\n")  # no zone: the pool is left alone, and why
    lines = _comments_with(tmp_path, capsys, manifest, config)
    assert (
        "#   warning: carbonshift: the local grid zone is unknown (no node names a region the "
        "region table knows and config zone is not set): NodePools are left alone"
    ) in lines
    assert not any("…" in line for line in lines)


def _comments_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], manifest: Path, config: Path
) -> list[str]:
    assert main(["mutate", "-f", str(manifest), "--config", str(config)]) == 0
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("#   ")]
