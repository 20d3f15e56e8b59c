"""The same mistake, the same answer: a zone written in lower case, as a country's name or
as a cloud region is refused by every command that reads it (serve, mutate, intensity,
report through the config; simulate through its scenario) with one line pointing to the
key meant and exit status 2; a misspelt key of a scenario is named with its file and the
valid keys; a misspelt kind in mutate's input is pointed to the handled one. The table of
exit statuses per cause is docs/cli.md's."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.cli import main

SCENARIO = """\
name: week
start: 2023-06-01T00:00:00Z
end: 2023-06-02T00:00:00Z
clusters:
  - {{name: de, zone: DE}}
  - {{name: other, zone: {zone}}}
workloads:
  - {{name: web, replicas: 4}}
"""
MANIFEST = """\
apiVersion: policy.karmada.io/v1alpha1
kind: {kind}
metadata: {{name: web, namespace: shop}}
spec:
  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: web}}]
"""
ZONES = [
    ("pl", "grid zone keys are upper case, got 'pl'; did you mean PL?"),
    ("France", "'France' is a country, not a grid zone key; did you mean FR?"),
    ("Japan", "did you mean JP-KN or JP-TK?"),
    ("eu-west-3", "'eu-west-3' is a cloud region, not a grid zone key; did you mean FR?"),
]


def _commands(tmp: Path, config: Path) -> list[list[str]]:
    manifest = tmp / "web.yaml"
    manifest.write_text(MANIFEST.format(kind="PropagationPolicy"))
    return [
        ["serve", "--config", str(config), "--cert-dir", str(tmp / "certs")],
        ["mutate", "-f", str(manifest), "--config", str(config)],
        ["intensity", "--config", str(config)],
        ["intensity", "DE", "--config", str(config)],
        ["intensity", "--clusters", "--config", str(config)],
        ["report", "--config", str(config), "--kubeconfig", str(tmp / "nowhere")],
    ]


@pytest.mark.parametrize(("zone", "said"), ZONES)
def test_a_zone_that_is_no_key_is_refused_alike_by_every_command(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    zone: str,
    said: str,
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    config = tmp_path / "config.yaml"
    config.write_text(f"providers: [static]\nclusters:\n  member: {{zone: {zone}}}\n")
    line = f"carbonshift: config {config}: clusters.member.zone: "
    for argv in _commands(tmp_path, config):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith(line), (argv, err)
        assert said in err, (argv, err)
        assert err.count("\n") == 1, (argv, err)
    assert not (tmp_path / "certs").exists()  # refused before anything was written
    scenario = tmp_path / "week.yaml"
    scenario.write_text(SCENARIO.format(zone=zone))
    assert main(["simulate", str(scenario), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"carbonshift simulate: {scenario}: clusters[1].zone: ")
    assert said in err


def test_a_zone_named_on_the_intensity_command_line_is_refused_alike(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["intensity", "pl"]) == 2
    assert capsys.readouterr().err == (
        "carbonshift: intensity: ZONE pl: grid zone keys are upper case, got 'pl'; "
        "did you mean PL?\n"
    )


def test_a_zone_no_provider_serves_is_refused_by_intensity_as_by_serve_and_mutate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("providers: [static]\nclusters:\n  member: {zone: XX}\n")
    said = "clusters.member.zone: no provider in the chain (static) has data for zone 'XX'"
    manifest = tmp_path / "web.yaml"
    manifest.write_text(MANIFEST.format(kind="PropagationPolicy"))
    for argv in (
        ["intensity", "--config", str(config)],
        ["intensity", "DE", "--config", str(config)],
        ["mutate", "-f", str(manifest), "--config", str(config)],
    ):
        assert main(argv) == 2, argv
        assert said in capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (("{name: de, zone: DE}", "{name: de, zone: DE, capacty: {share: 0.5}}"),
         "clusters[0].capacty: unknown field; did you mean capacity? (valid: name, zone, "
         "capacity)"),
        (("{name: de, zone: DE}", "{name: de, zone: DE, capacity: {shar: 0.5}}"),
         "clusters[0].capacity.shar: unknown field; did you mean share? (valid: share, "
         "replicas)"),
        (("name: week", "nme: week"), "nme: unknown field; did you mean name? (valid: name, "),
        (("{name: web, replicas: 4}", "{name: web, replicas: 4, colour: green}"),
         "workloads[0].colour: unknown field (valid: name, replicas, movable, "),
        (("zone: {zone}", "zone: PL"), "clusters[1].zone: no trace for zone 'PL' (traces for: "),
        (("zone: {zone}", "zone: SGP"), "clusters[1].zone: no trace for zone 'SGP'; did you "
         "mean SG?"),
    ],
)  # fmt: skip
def test_a_scenario_error_names_the_file_and_the_valid_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: tuple[str, str], said: str
) -> None:
    scenario = tmp_path / "week.yaml"
    scenario.write_text(SCENARIO.format(zone="{zone}").replace(*change).replace("{zone}", "GB"))
    assert main(["simulate", str(scenario), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"carbonshift simulate: {scenario}: {said}"), err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("PropagatonPolicy", "kind not handled; did you mean PropagationPolicy?"),
        ("propagationpolicy", "kind not handled; did you mean PropagationPolicy?"),
        ("ClusterPropagationPolcy", "kind not handled; did you mean ClusterPropagationPolicy?"),
        ("OverridePolicy", "kind not handled\n"),
    ],
)
def test_a_misspelt_kind_is_pointed_to_the_handled_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, said: str
) -> None:
    manifest = tmp_path / "web.yaml"
    manifest.write_text(MANIFEST.format(kind=kind))
    assert main(["mutate", "-f", str(manifest), "--config", "config/example.yaml"]) == 0
    assert f"#   reason: {said}" in capsys.readouterr().out
