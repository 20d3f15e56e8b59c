"""What a first reader of the README runs and copies: the quickstart's commands work as
written, and every address of the in-cluster Service uses the port the Service exposes."""

from __future__ import annotations

import itertools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from webhook.cli import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text("utf-8")
SERVICE = yaml.safe_load((ROOT / "manifests" / "base" / "service.yaml").read_text("utf-8"))
SERVICE_PORT = SERVICE["spec"]["ports"][0]["port"]
SERVICE_HOST = f"{SERVICE['metadata']['name']}.{SERVICE['metadata']['namespace']}.svc"


def _documents() -> list[Path]:
    found = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    for folder, suffixes in (
        ("manifests", (".yaml",)),
        ("examples", (".yaml",)),
        ("karmada-plugin", (".go", ".md")),
    ):
        found += [p for p in (ROOT / folder).rglob("*") if p.suffix in suffixes]
    return sorted(found)


def test_every_address_of_the_service_uses_its_port() -> None:
    """The extender's urlPrefix and the plugin's --carbonshift-url go through the Service,
    which listens on 443 (the pod's 8443 is only its targetPort)."""
    pattern = re.compile(re.escape(SERVICE_HOST) + r"(?:\.cluster\.local)?(?::(\d+))?")
    seen = 0
    for path in _documents():
        for match in pattern.finditer(path.read_text("utf-8")):
            seen += 1
            port = int(match[1] or 443)
            assert port == SERVICE_PORT, f"{path.relative_to(ROOT)}: {match[0]}"
    assert seen >= 3  # README (extender, plugin) and the plugin's options


def test_the_readme_gives_the_scheduler_apis_error_body() -> None:
    section = README[README.index("## Scheduler integration") :]
    section = section[: section.index("\n## ", 1)]
    assert '`400 {"error": "<field>: <problem>"}`' in section
    assert '{"reason"' not in section


def _quickstart_commands() -> list[str]:
    quickstart = README[README.index("## Quickstart") : README.index("## Try it locally")]
    lines = [line.split("#")[0].strip() for line in quickstart.splitlines()]
    return [line for line in lines if line.startswith(".venv/bin/carbonshift ")]


def test_the_quickstart_names_files_that_exist() -> None:
    commands = _quickstart_commands()
    assert len(commands) >= 2
    for command in commands:
        argv = shlex.split(command)
        for flag, value in itertools.pairwise(argv):
            if flag in ("-f", "--config"):
                assert (ROOT / value).exists(), f"{command}: {value} does not exist"


@pytest.mark.parametrize("command", _quickstart_commands())
def test_the_quickstarts_offline_commands_run(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    assert main(shlex.split(command)[1:]) == 0
    out, err = capsys.readouterr()
    assert out
    assert err == ""


def _recipes(target: str) -> list[str]:
    """The commands ``make TARGET`` runs from nothing (``make -n -B``: every prerequisite
    remade, nothing executed)."""
    made = subprocess.run(
        ["make", "-n", "-B", "-C", str(ROOT), target],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return made.stdout.splitlines()


def test_make_run_installs_only_what_running_needs_and_says_how_long() -> None:
    """`make run` (the README's first command) installs carbonshift and its runtime
    dependencies, not the development tools that `make test` brings."""
    lines = _recipes("run")
    assert any(re.search(r"pip install --quiet -e \.$", line) for line in lines), lines
    assert not any("[dev]" in line for line in lines), lines
    assert any("first run" in line for line in lines), lines
    assert any("[dev]" in line for line in _recipes("test"))


def test_make_bench_runs_what_the_readme_says() -> None:
    """`make bench` alone runs the admission and score benchmarks, as the README says."""
    assert "`make bench` (admission and score;" in README
    (run,) = [line for line in _recipes("bench") if "-m bench" in line]
    assert run.split("-m bench", 1)[1].split() == ["admission", "score"], run


def test_the_command_line_loads_no_network_stack_to_answer_help() -> None:
    """`carbonshift --help` answers at once (under 0.5 s on an idle machine, `time
    carbonshift --help`): building the parser loads no HTTP, Redis, Kubernetes,
    Prometheus or plotting library; each command imports those when it runs."""
    heavy = ("aiohttp", "aiocache", "redis", "kubernetes_asyncio", "prometheus_client",
             "matplotlib", "numpy")  # fmt: skip
    probe = f"import sys, webhook.cli; print([m for m in {heavy!r} if m in sys.modules])"
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert found.stdout.strip() == "[]", found.stdout
