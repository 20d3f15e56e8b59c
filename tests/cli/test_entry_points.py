"""Every command and module entry point answers ``--help`` with help, exits 0 and does
nothing else (no benchmark run, no control plane started, no files written)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.sandbox.components import default_carbonshift

ROOT = Path(__file__).resolve().parents[2]


SUBCOMMANDS = ["serve", "certs", "mutate", "intensity", "simulate", "explain"]
MODULES = [
    "webhook.cli",
    "bench",
    "bench.floor",
    "devtools.sandbox",
    "devtools.sandbox.workload",
    "devtools.chart_schema",
    "devtools.manifests",
    "devtools.sandbox.kueue",
]

COMMANDS: dict[str, list[str]] = {
    "carbonshift": default_carbonshift(),
    **{f"carbonshift {sub}": [*default_carbonshift(), sub] for sub in SUBCOMMANDS},
    **{f"python -m {module}": [sys.executable, "-m", module] for module in MODULES},
    ".ci/run": [shutil.which("bash") or "/bin/bash", str(ROOT / ".ci" / "run")],
    "hack/build-binaries.sh": [
        shutil.which("bash") or "/bin/bash",
        str(ROOT / "hack" / "build-binaries.sh"),
    ],
}


def _environment(name: str, tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if name == ".ci/run":
        # Only `cat` on PATH: were --help ignored, the script would stop at once instead
        # of running the whole suite inside this test.
        tools = tmp_path.parent / f"{tmp_path.name}-tools"
        tools.mkdir()
        cat = shutil.which("cat")
        assert cat
        (tools / "cat").symlink_to(cat)
        env["PATH"] = str(tools)
    return env


@pytest.mark.parametrize("name", COMMANDS)
def test_help_prints_usage_and_exits_0(name: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [*COMMANDS[name], "--help"],
        cwd=tmp_path,
        env=_environment(name, tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage:"), result.stdout[:200]
    assert len(result.stdout.splitlines()) > 3, "a description, not only the usage line"
    assert result.stderr == ""
    assert list(tmp_path.iterdir()) == [], "--help wrote files"


def test_every_module_entry_point_is_covered() -> None:
    """A new ``__main__`` module (or ``if __name__ == "__main__"`` block) gets a row here."""
    found = set()
    for package in ("webhook", "bench", "devtools"):
        for path in (ROOT / package).rglob("*.py"):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            text = path.read_text(encoding="utf-8")
            if path.name == "__main__.py":
                found.add(module.removesuffix(".__main__"))
            elif 'if __name__ == "__main__":' in text:
                found.add(module)
    # bench.admission and bench.score run their benchmark whatever the arguments;
    # `python -m bench admission|score` is their entry point with help. bench.reevaluate's
    # is the process the passes are measured in (`python -m bench reevaluate` starts it).
    exempt = {"bench.admission", "bench.score", "bench.reevaluate"}
    assert found - exempt == set(MODULES)
