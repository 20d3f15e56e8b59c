"""The sandbox's Karmada release: the one ``hack/tools`` pins (karmada-scheduler with
carbonshift's plugin) or another a ``hack/karmada-*/go.mod`` pins (its stock components,
binaries ``<name>-<version>``, CRDs ``<cache>/crds/karmada-<version>/``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.sandbox import Layout, Sandbox, SandboxError
from devtools.sandbox.components import define_components, port_names
from devtools.sandbox.control_plane import MEMBERS
from devtools.sandbox.layout import KarmadaRelease, karmada_release, karmada_releases

ROOT = Path(__file__).resolve().parents[2]
KARMADA_BINARIES = ("karmada-controller-manager", "karmada-webhook", "karmada-scheduler")


def test_the_checkout_pins_v1_18_2_with_the_plugin_and_v1_16_0_stock() -> None:
    releases = karmada_releases(ROOT)
    assert releases == {
        "v1.18.2": KarmadaRelease("v1.18.2", pinned=True),
        "v1.16.0": KarmadaRelease("v1.16.0", pinned=False),
    }
    assert list(releases) == ["v1.18.2", "v1.16.0"]  # the pinned one first
    assert karmada_release(None, ROOT) == releases["v1.18.2"]
    old = releases["v1.16.0"]
    assert old.binaries == tuple(f"{n}-v1.16.0" for n in KARMADA_BINARIES)
    assert old.crds == "karmada-v1.16.0"
    assert not old.plugin
    assert releases["v1.18.2"].binaries == KARMADA_BINARIES
    assert releases["v1.18.2"].crds == "karmada"


def test_a_release_no_module_pins_is_refused_naming_the_pinned_ones(tmp_path: Path) -> None:
    with pytest.raises(
        SandboxError, match=r"no module pins Karmada v1\.17\.0 .*v1\.18\.2, v1\.16\.0"
    ):
        karmada_release("v1.17.0", ROOT)
    with pytest.raises(SandboxError, match=r"no module pins Karmada v1\.17\.0"):
        Sandbox(Layout.default(tmp_path / "state"), karmada="v1.17.0", log=lambda _m: None)


def test_a_release_module_is_read_from_a_single_require_line_or_a_block(tmp_path: Path) -> None:
    (tmp_path / "hack" / "tools").mkdir(parents=True)
    (tmp_path / "hack" / "tools" / "go.mod").write_text(
        "module x\n\ngo 1.25\n\nrequire (\n\tgithub.com/karmada-io/karmada v1.18.2\n"
        "\tk8s.io/api v0.35.4 // indirect\n)\n"
    )
    (tmp_path / "hack" / "karmada-1.15").mkdir()
    (tmp_path / "hack" / "karmada-1.15" / "go.mod").write_text(
        "module y\n\nrequire github.com/karmada-io/karmada v1.15.3\n"
    )
    (tmp_path / "hack" / "karmada-none").mkdir()  # no go.mod: not a release
    assert karmada_releases(tmp_path) == {
        "v1.18.2": KarmadaRelease("v1.18.2", pinned=True),
        "v1.15.3": KarmadaRelease("v1.15.3", pinned=False),
    }


def components(tmp_path: Path, release: KarmadaRelease) -> dict[str, list[str]]:
    """Each Karmada component's command line for ``release`` (fake binaries in the cache)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    names = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]
    for name in [*names, *release.binaries]:
        (cache / name).write_text("#!/bin/sh\n")
        (cache / name).chmod(0o755)
    (cache / "crds" / "kwok").mkdir(parents=True)
    (cache / "crds" / "kwok" / "kwok-controller-config.yaml").write_text("{}\n")
    layout = Layout(root=ROOT, state=tmp_path / "state", bin=cache)
    ports = {name: 20000 + i for i, name in enumerate(port_names(MEMBERS))}
    found = define_components(
        layout, ports, MEMBERS, carbonshift_command=["carbonshift"], cert_reload_seconds=1.0,
        karmada=release,
    )  # fmt: skip
    return {name: found[name].argv for name in KARMADA_BINARIES}


def test_another_release_runs_its_own_stock_binaries(tmp_path: Path) -> None:
    got = components(tmp_path, karmada_release("v1.16.0", ROOT))
    for name, command in got.items():
        assert command[0] == str(tmp_path / "cache" / f"{name}-v1.16.0")
    scheduler = " ".join(got["karmada-scheduler"])
    assert "--carbonshift" not in scheduler  # the stock scheduler has no plugin flags
    assert "--feature-gates" not in scheduler  # nor v1.18's SchedulingOvercommitProtection


def test_the_pinned_release_runs_the_plugin_scheduler(tmp_path: Path) -> None:
    got = components(tmp_path, karmada_release(None, ROOT))
    assert got["karmada-scheduler"][0] == str(tmp_path / "cache" / "karmada-scheduler")
    scheduler = " ".join(got["karmada-scheduler"])
    assert "--carbonshift-url=https://127.0.0.1:" in scheduler
    assert "--feature-gates=SchedulingOvercommitProtection=true" in scheduler


def test_the_crds_come_from_the_release_folder(tmp_path: Path) -> None:
    layout = Layout(root=ROOT, state=tmp_path / "state", bin=tmp_path / "cache")
    with pytest.raises(
        SandboxError, match=r"crds/karmada-v1\.16\.0/apps\.karmada\.io_.*make binaries"
    ):
        layout.crd_files(karmada_release("v1.16.0", ROOT).crds)
