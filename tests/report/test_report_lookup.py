"""``carbonshift report`` finds the leader's ledger wherever the leader keeps it: by its
labels across namespaces, or in ``--namespace`` only; and it says where it read."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests import kubeapi
from tests.report.sample import ledger
from webhook.cli import main
from webhook.decision.ledger import LEDGER_LABELS
from webhook.kube import reads
from webhook.model.errors import UsageError

LEADER = "carbonshift-system"
NAME = "carbonshift-accounting"


def configmap(namespace: str, name: str = NAME, labels: dict[str, str] | None = None) -> Any:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": dict(LEDGER_LABELS) if labels is None else labels},
        "data": ledger(),
    }  # fmt: skip


async def test_the_ledger_is_found_by_its_labels_in_the_leaders_namespace() -> None:
    async with kubeapi.serve() as kube:
        kube.add(configmap(LEADER), "configmaps")
        kube.add(configmap("shop", "unrelated", labels={"app": "web"}), "configmaps")
        source = await reads.ledger(kube.api, NAME, None, fallback="default")
    assert source.data == ledger()
    assert source.where == f"accounting read from ConfigMap {LEADER}/{NAME} (found by its labels)"


async def test_a_ledger_named_otherwise_is_found_by_its_ledger_label() -> None:
    async with kubeapi.serve() as kube:
        kube.add(configmap(LEADER, "books"), "configmaps")
        source = await reads.ledger(kube.api, NAME, None, fallback="default")
    assert source.data == ledger()
    assert f"{LEADER}/books" in source.where


async def test_a_ledger_from_before_the_ledger_label_is_found_by_its_name() -> None:
    legacy = {"app.kubernetes.io/managed-by": "carbonshift"}
    async with kubeapi.serve() as kube:
        kube.add(configmap(LEADER, labels=legacy), "configmaps")
        kube.add(configmap("ops", "cluster-labels", labels=legacy), "configmaps")
        source = await reads.ledger(kube.api, NAME, None, fallback="default")
    assert source.data == ledger()


async def test_namespace_reads_that_namespace_only() -> None:
    async with kubeapi.serve() as kube:
        kube.add(configmap(LEADER), "configmaps")
        here = await reads.ledger(kube.api, NAME, LEADER, fallback="default")
        elsewhere = await reads.ledger(kube.api, NAME, "default", fallback="default")
        lists = [c for c in kube.calls("GET", "configmaps") if not c.where.namespace]
    assert here.data == ledger()
    assert here.where == f"accounting read from ConfigMap {LEADER}/{NAME} (--namespace)"
    assert elsewhere.data is None
    assert elsewhere.where.startswith(f"no accounting yet: no ConfigMap default/{NAME}")
    assert lists == []  # no lookup across namespaces


async def test_no_ledger_anywhere_says_where_it_looked() -> None:
    async with kubeapi.serve() as kube:
        source = await reads.ledger(kube.api, NAME, None, fallback="default")
    assert source.data is None
    assert source.where.startswith(
        f"no accounting yet: no ConfigMap labelled carbonshift.io/ledger or named {NAME} "
        "in any namespace"
    )


async def test_two_ledgers_ask_for_a_namespace() -> None:
    async with kubeapi.serve() as kube:
        kube.add(configmap(LEADER), "configmaps")
        kube.add(configmap("staging"), "configmaps")
        with pytest.raises(
            UsageError, match=rf"\({LEADER}/{NAME}, staging/{NAME}\): pass --namespace"
        ):
            await reads.ledger(kube.api, NAME, None, fallback="default")


async def test_a_refused_lookup_reads_the_fallback_namespace_and_says_so() -> None:
    async with kubeapi.serve() as kube:
        kube.add(configmap("default"), "configmaps")
        kube.fail("GET", "configmaps", 403)  # the list across namespaces
        source = await reads.ledger(kube.api, NAME, None, fallback="default")
    assert source.data == ledger()
    assert "listing ConfigMaps across namespaces was refused; pass --namespace NS" in source.where


def kubeconfig_for(kube: Any, tmp_path: Path) -> Path:
    """A kubeconfig naming the test API server."""
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: c, cluster: {{server: '{kube.api.configuration.host}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    return path


async def test_the_command_reads_the_leaders_ledger_and_says_where_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    async with kubeapi.serve() as kube:
        kube.add(configmap(LEADER), "configmaps")
        kubeconfig = kubeconfig_for(kube, tmp_path)
        argv = ["report", "--kubeconfig", str(kubeconfig), "-o", "json", "--since", "30d"]
        code = await asyncio.to_thread(main, argv)  # the command runs its own event loop
    out, err = capsys.readouterr()
    assert code == 0, err
    assert {w["name"] for w in orjson.loads(out)["workloads"]} == {"web", "batch"}
    assert err == (
        f"carbonshift report: accounting read from ConfigMap {LEADER}/{NAME} "
        "(found by its labels)\n"
    )


async def test_a_broken_ledger_in_the_cluster_is_said_not_read_as_zeros(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    broken = configmap(LEADER)
    name = sorted(broken["data"])[0]
    broken["data"][name] = "{not json"
    async with kubeapi.serve() as kube:
        kube.add(broken, "configmaps")
        kubeconfig = kubeconfig_for(kube, tmp_path)
        argv = ["report", "--kubeconfig", str(kubeconfig), "--since", "30d"]
        code = await asyncio.to_thread(main, argv)
    out, err = capsys.readouterr()
    assert code == 1, (out, err)
    assert out == ""
    assert err.startswith(f"carbonshift report: accounting read from ConfigMap {LEADER}/{NAME}")
    assert f'ledger["{name}"]: not JSON text' in err, err
    assert err.count("\n") == 1, err
