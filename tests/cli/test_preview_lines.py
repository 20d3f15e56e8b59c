"""What ``carbonshift mutate`` says above each object: ``note:`` for what carbonshift did,
``warning:`` for what is wrong, an annotation's problem in full (admission cuts its
warnings to 120 characters, the preview does not), and a candidate cluster the config
does not hold said to be not in the config rather than without data."""

from __future__ import annotations

from pathlib import Path

import pytest

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
    clusterAffinity: {clusterNames: [member-se, member-fr, member-xx]}
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
