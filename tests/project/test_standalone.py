"""The repository stands alone: a copy of its tracked files, with nothing beside it, runs
every scenario on the traces it ships and finds the CRDs where ``hack/crds.sh`` puts them
(the binary cache), and no tracked file points outside the checkout for data."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import ssl
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from devtools.sandbox.layout import SandboxError, crd, free_port

ROOT = Path(__file__).resolve().parents[2]


def _outside() -> list[str]:
    """How a file would name a folder beside the checkout: ``../<sibling>`` or its absolute
    path, for every folder that sits beside this checkout on this machine."""
    parent = ROOT.parent
    siblings = [p.name for p in parent.iterdir() if p.is_dir() and p != ROOT]
    return [f"../{name}/" for name in siblings] + [str(parent / name) for name in siblings]


WEEK = timedelta(days=7)
"""How much of each scenario runs: its first week (a few seconds, not a year)."""


def _tracked() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True, timeout=60
    ).stdout
    return [name for name in out.decode().split("\0") if name and (ROOT / name).is_file()]


def test_no_tracked_file_reads_a_folder_beside_the_checkout() -> None:
    offenders = []
    needles = _outside()
    for name in _tracked():
        data = (ROOT / name).read_bytes()
        offenders += [f"{name}: {needle}" for needle in needles if needle.encode() in data]
    assert not offenders, offenders


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tracked files alone, in a folder with no sibling ``shared``."""
    tree = tmp_path_factory.mktemp("alone") / "carbonshift"
    for name in _tracked():
        target = tree / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    assert not (tree.parent / "shared").exists()
    return tree


def _env(clone: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CARBONSHIFT_", "PYTHON", "KUBECONFIG"))}  # fmt: skip
    return {**env, "PYTHONPATH": str(clone), **extra}


def _run(clone: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=clone, env=_env(clone, **env),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scenario", sorted(p.name for p in (ROOT / "scenarios").glob("*.yaml")))
def test_every_scenario_runs_from_the_clone_on_the_shipped_traces(
    clone: Path, scenario: str
) -> None:
    path = clone / "scenarios" / scenario
    text = path.read_text()
    assert re.search(r"^end: .*$", text, re.MULTILINE), "scenario without an end"
    start = re.search(r"^start: (.*)$", text, re.MULTILINE)
    assert start, "scenario without a start"
    end = datetime.fromisoformat(start.group(1).strip().replace("Z", "+00:00")) + WEEK
    week = clone / "scenarios" / f"week-{scenario}"
    week.write_text(re.sub(r"^end: .*$", f"end: {end.isoformat()}", text, count=1,
                           flags=re.MULTILINE))  # fmt: skip
    done = _run(clone, "-m", "webhook.cli", "simulate", str(week), "--json", "--no-progress")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert "2023" in json.dumps(doc)
    imported = _run(clone, "-c", "import webhook.model.traces as t; print(t.SHIPPED)")
    assert Path(imported.stdout.strip()).is_relative_to(clone), imported.stdout + imported.stderr


def test_a_missing_crd_names_make_binaries(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match=r"is missing: run `make binaries`") as info:
        crd("karmada", "policy.karmada.io_propagationpolicies.yaml", tmp_path)
    assert "\n" not in str(info.value)


@pytest.mark.timeout(300)
def test_the_clone_fetches_its_crds_from_the_pinned_modules(clone: Path, tmp_path: Path) -> None:
    lookup = (
        "from devtools.sandbox.layout import crd;"
        "print(crd('karmada', 'policy.karmada.io_propagationpolicies.yaml'));"
        "print(crd('karpenter', 'karpenter.sh_nodepools.yaml'))"
    )
    before = _run(clone, "-c", lookup)
    assert before.returncode != 0
    assert "run `make binaries`" in before.stderr.strip().splitlines()[-1]
    if shutil.which("go") is None:
        pytest.skip("go is not installed: hack/crds.sh needs it to download the modules")
    cache = tmp_path / "cache"
    fetched = subprocess.run(
        [str(clone / "hack" / "crds.sh"), "--no-generate", "karmada", "karpenter"],
        cwd=clone, env=_env(clone, CARBONSHIFT_CACHE=str(cache)),
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    if fetched.returncode != 0 and "go mod download" in fetched.stderr:
        pytest.skip(f"the pinned modules cannot be downloaded here: {fetched.stderr.strip()}")
    assert fetched.returncode == 0, fetched.stderr
    after = _run(clone, "-c", lookup, CARBONSHIFT_CACHE=str(cache))
    assert after.returncode == 0, after.stderr
    paths = [Path(line) for line in after.stdout.split()]
    assert [p.parent.name for p in paths] == ["karmada", "karpenter"]
    assert all(p.is_relative_to(cache / "crds") for p in paths)
    stamp = (cache / "crds" / "karmada.version").read_text()
    assert stamp.startswith("github.com/karmada-io/karmada@v"), stamp


def _make_run(clone: Path, port: int, certs: Path) -> list[str]:
    """The clone's `make run` recipe, run by this interpreter from the clone (no venv
    there), on ``port`` with its certificates in ``certs``."""
    lines = (clone / "Makefile").read_text().splitlines()
    recipe = shlex.split(lines[next(i for i, ln in enumerate(lines) if ln.startswith("run:")) + 1])
    assert recipe[0].endswith("/carbonshift"), recipe
    args = recipe[1:]
    args[args.index("--port") + 1] = str(port)
    args[args.index("--cert-dir") + 1] = str(certs)
    assert args[:3] == ["serve", "--config", "config/example.yaml"], args
    return [sys.executable, "-m", "webhook.cli", *args]


@pytest.mark.timeout(60)
def test_make_run_serves_from_the_clone(clone: Path, tmp_path: Path) -> None:
    """`make run`'s command, from the copy with nothing beside it: it makes its development
    certificates, reads config/example.yaml and answers https /healthz, with no cluster."""
    port, certs = free_port(), tmp_path / "certs"
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            _make_run(clone, port, certs), cwd=clone, env=_env(clone),
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        status = None
        while status is None:
            assert server.poll() is None, f"serve exited {server.returncode}:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"no answer in 20 s:\n{log.read_text()}"
            if (certs / "ca.crt").is_file():
                context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
                try:
                    url = f"https://127.0.0.1:{port}/healthz"
                    with urllib.request.urlopen(url, context=context, timeout=2) as answer:
                        status = answer.status
                except OSError:
                    pass
            time.sleep(0.2)
        assert status == 200
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(5)
