"""``carbonshift mutate`` previews every handled kind offline: a Liqo NamespaceOffloading
on the config's clusters and the input's virtual nodes taken as peers, a MultiKueueConfig's
carbon order, and a Kueue Job's carbon window (which worker, until when, why), saying what
the answer takes from the live cluster."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from webhook.cli import main
from webhook.model.vocabulary import DECISION, parse_time

OFFLOADING = {
    "apiVersion": "offloading.liqo.io/v1beta1",
    "kind": "NamespaceOffloading",
    "metadata": {"name": "offloading", "namespace": "shop"},
    "spec": {"podOffloadingStrategy": "LocalAndRemote"},
}
VIRTUAL_NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "liqo-remote-se",
        "labels": {"liqo.io/type": "virtual-node", "liqo.io/remote-cluster-id": "remote-se",
                   "carbonshift.io/zone": "SE-SE3"},
    },
}  # fmt: skip
LIQO_CONFIG = "zone: DE\nclusters:\n  member-fr: {zone: FR}\n  member-pl: {zone: PL}\n"

MULTIKUEUE_CONFIG = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "MultiKueueConfig",
    "metadata": {"name": "fleet", "labels": {"carbonshift.io/enabled": "true"}},
    "spec": {"clusters": ["worker-a", "worker-b"]},
}
WORKER_B = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "MultiKueueCluster",
    "metadata": {"name": "worker-b", "labels": {"carbonshift.io/zone": "FR"}},
    "spec": {},
}


def job(name: str = "later", **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations,
                     "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}},
    }  # fmt: skip


HEADER = (
    "Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
    "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,"
    "Data Source,Data Estimated,Data Estimation Method\n"
)


def traces(tmp_path: Path, kueue: str) -> str:
    """A config on hourly traces replayed from now: FR 400 g/kWh for two hours, then 30
    for two, then 400; PL 700 throughout; the provider's own forecast ranks."""
    folder = tmp_path / "traces"
    folder.mkdir()
    start = datetime.datetime(2023, 1, 1)
    for zone, values in (("FR", [400, 400, 30, 30] + [400] * 44), ("PL", [700] * 48)):
        rows = [
            f"{start + datetime.timedelta(hours=i):%Y-%m-%d %H:%M:%S},X,X,{zone},{v},{v},0,0,x,"
            "false,\n"
            for i, v in enumerate(values)
        ]
        (folder / f"{zone}.csv").write_text(HEADER + "".join(rows))
    config = tmp_path / "c.yaml"
    config.write_text(
        f"providers: [trace]\ntrace: {{path: {folder}, mode: shifted}}\n"
        "feed: {forecasts: true}\nreevaluate: {forecast: provider}\n"
        f"kueue: {kueue}\nclusters:\n  worker-a: {{zone: PL}}\n"
    )
    return str(config)


def mutate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, *docs: dict[str, Any]
) -> str:
    manifest = tmp_path / "in.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    assert main(["mutate", "-f", str(manifest), "--config", config]) == 0
    return capsys.readouterr().out


def as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, *docs: dict[str, Any]
) -> list[dict[str, Any]]:
    manifest = tmp_path / "in.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    assert main(["mutate", "-f", str(manifest), "--config", config, "-o", "json"]) == 0
    found: list[dict[str, Any]] = orjson.loads(capsys.readouterr().out)
    return found


def selector_ids(offloading: dict[str, Any]) -> list[str]:
    (term,) = offloading["spec"]["clusterSelector"]["nodeSelectorTerms"]
    (expression,) = term["matchExpressions"]
    assert expression["key"] == "liqo.io/remote-cluster-id"
    values: list[str] = expression["values"]
    return values


# --- Liqo ----------------------------------------------------------------------------------


def test_the_configs_clusters_are_the_peers_of_a_namespace_offloading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "c.yaml").write_text(LIQO_CONFIG)
    (result,) = as_json(tmp_path, capsys, str(tmp_path / "c.yaml"), OFFLOADING)
    assert result["outcome"] == "patched"
    assert selector_ids(result["object"]) == ["member-fr"]  # FR is green, PL is not
    assert set(result["decision"]["clusters"]) == {"member-fr", "member-pl"}
    (note,) = result["notes"]
    assert note.startswith("Liqo peers offline: the config's clusters (member-fr, member-pl)")
    assert "depends on the live cluster: the webhook reads its virtual nodes" in note
    assert result["warnings"] == []


def test_a_virtual_node_in_the_input_is_a_peer_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "c.yaml").write_text(LIQO_CONFIG)
    out = mutate(tmp_path, capsys, str(tmp_path / "c.yaml"), OFFLOADING, VIRTUAL_NODE)
    offloading, node = yaml.safe_load_all(out)
    assert selector_ids(offloading) == ["member-fr", "remote-se"]
    assert "the virtual nodes in the input (liqo-remote-se -> remote-se)" in out
    assert (
        "# carbonshift: Node liqo-remote-se: ignored\n#   reason: Liqo virtual node: remote "
        "cluster remote-se, grid zone SE-SE3 (label), a peer of the input's "
        "NamespaceOffloadings\n"
    ) in out
    assert node == VIRTUAL_NODE


def test_a_node_that_is_no_virtual_node_is_no_peer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "c.yaml").write_text("zone: DE\n")
    plain = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {}}}
    results = as_json(tmp_path, capsys, str(tmp_path / "c.yaml"), OFFLOADING, plain)
    assert results[0]["outcome"] == "skipped"  # no peer at all: left as is, and why
    assert results[0]["reason"].startswith("clusterSelector allows no known remote cluster")
    assert results[1]["reason"] == "kind not handled"


# --- Kueue: the carbon order of a MultiKueueConfig ---------------------------------------


def test_an_opted_in_multikueue_config_gets_the_order_the_leader_keeps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = traces(tmp_path, "{enabled: true, dispatch: order}")
    out = mutate(tmp_path, capsys, config, MULTIKUEUE_CONFIG, WORKER_B)
    stored, cluster = yaml.safe_load_all(out)
    assert stored["spec"]["clusters"] == ["worker-b", "worker-a"]
    recorded = orjson.loads(stored["metadata"]["annotations"][DECISION])
    assert recorded["order"] == ["worker-b", "worker-a"]
    assert "# carbonshift: MultiKueueConfig fleet: ordered\n" in out
    assert (
        "#   carbon order: worker-b 400 g/kWh -> worker-a 700 g/kWh (mean over the next 1h, "
        "kueue.default_runtime_seconds)"
    ) in out
    assert (
        "#   zones: worker-a PL (config clusters.worker-a); worker-b FR (MultiKueueCluster "
        "worker-b carbonshift.io/zone)"
    ) in out
    assert "#   note: depends on the live cluster: Kueue's incremental dispatcher" in out
    assert "MultiKueue worker worker-b: grid zone FR" in out
    assert cluster == WORKER_B


def test_the_order_is_shown_but_not_written_unless_kueue_dispatch_is_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = traces(tmp_path, "{enabled: false}")
    result, _ = as_json(tmp_path, capsys, config, MULTIKUEUE_CONFIG, WORKER_B)
    assert result["outcome"] == "unchanged"
    assert result["object"] == MULTIKUEUE_CONFIG
    assert result["reason"].startswith("kueue.dispatch is external: the leader orders")
    assert result["details"]["carbon order"].startswith("worker-b 400 g/kWh -> worker-a")
    assert any("only with kueue.enabled: true" in n for n in result["notes"])


def test_a_multikueue_config_not_labelled_is_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = traces(tmp_path, "{enabled: true, dispatch: order}")
    plain = {**MULTIKUEUE_CONFIG, "metadata": {"name": "fleet"}}
    (result,) = as_json(tmp_path, capsys, config, plain)
    assert (result["outcome"], result["object"]) == ("skipped", plain)
    assert result["reason"] == "not opted in (cluster-scoped objects need label " \
                               "carbonshift.io/enabled=true)"  # fmt: skip


# --- Kueue: a Job's carbon window -----------------------------------------------------------


def test_a_kueue_job_previews_its_carbon_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = traces(tmp_path, "{enabled: true}")
    before = datetime.datetime.now(datetime.UTC)
    docs = as_json(tmp_path, capsys, config, MULTIKUEUE_CONFIG, WORKER_B,
                   job(**{"carbonshift.io/max-delay": "6h"}))  # fmt: skip
    result = docs[2]
    assert result["outcome"] == "pending"
    assert result["object"] == job(**{"carbonshift.io/max-delay": "6h"})  # a Job is not mutated
    details = result["details"]
    assert details["when"].startswith("waits until ")
    assert details["when"].endswith(" on worker-b (grid FR)")
    window = result["decision"]["window"]
    until = parse_time(window["until"])
    hour = before.replace(minute=0, second=0, microsecond=0)
    assert until - hour in (datetime.timedelta(hours=2), datetime.timedelta(hours=1))
    assert window["ready"] is False
    assert "waiting for a greener 1h run: 30 g/kWh from" in window["reason"]
    assert result["reason"].startswith("carbon window: waiting for a greener 1h run")
    assert details["where"] == (
        "nominated worker-b: worker-b first: 400 g/kWh over the 1h run vs 700 g/kWh on worker-a"
    )
    assert details["workers"].startswith("the clusters of MultiKueueConfig fleet in the input")
    live = [n for n in result["notes"] if n.startswith("depends on the live cluster")]
    assert any("each worker's room" in n for n in live)
    assert any("once Kueue reserved quota for the Job's Workload" in n for n in live)


def test_a_job_without_a_delay_starts_at_once_and_says_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = traces(tmp_path, "{enabled: true}")
    out = mutate(tmp_path, capsys, config, job("now"))
    assert "# carbonshift: Job now: ready\n" in out
    assert "#   reason: carbon window: no max-delay: starts at once (grid PL)" in out
    assert "#   when: starts at once on worker-a (grid PL)\n" in out  # the config's one worker
    assert "#   workers: the config's clusters (no MultiKueueConfig in the input): worker-a " in out
    assert "CarbonWindow its AdmissionCheck names" in out  # the live delay, said


def test_a_job_in_a_namespace_not_opted_in_is_not_held(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = traces(tmp_path, "{enabled: true}")
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
    _, result = as_json(tmp_path, capsys, config, namespace,
                        job(**{"carbonshift.io/max-delay": "6h"}))  # fmt: skip
    assert result["outcome"] == "ready"
    assert result["reason"] == (
        "carbonshift leaves it alone: not opted in (no carbonshift.io/enabled=true on its "
        "namespace)"
    )


def test_a_malformed_delay_is_named_and_not_held(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = traces(tmp_path, "{enabled: true}")
    (result,) = as_json(tmp_path, capsys, config, job(**{"carbonshift.io/max-delay": "banana"}))
    assert result["outcome"] == "ready"
    assert result["reason"].startswith("not held: carbonshift.io/max-delay: ")
    assert "banana" in result["reason"]
    assert any("a Warning Event names the annotation" in n for n in result["notes"])


def test_a_job_kueue_does_not_queue_is_not_handled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = traces(tmp_path, "{enabled: true}")
    plain = job()
    plain["metadata"]["labels"] = {}
    (result,) = as_json(tmp_path, capsys, config, plain)
    assert (result["outcome"], result["reason"]) == ("ignored", "kind not handled")
