"""The docs are executable or checked.

Every fenced shell block (```sh, ```console, ```bash) of README.md and docs/*.md either runs
here, offline, and exits 0, or is marked right before its fence with what it needs that a
unit test does not have::

    <!-- needs: cluster -->

``cluster``: a Kubernetes or Karmada API server (kubectl, helm install); ``server``: a
running ``carbonshift serve`` (``make run``) to talk to; ``network``: the internet beyond
the package registries (a provider's API, a container registry); ``build``: builds the Go
binaries or runs a long make target or test suite; ``minutes``: runs offline but for minutes
(a year of hourly data). An unmarked block that fails here fails the test: fix the command
or mark the block.

Beside that: every HTTP path the docs name (``POST /mutate``, ``/v1/karmada/score``,
``https://127.0.0.1:8443/readyz``) is a route of the server, every ``--flag`` the docs
attach to ``carbonshift <command>`` is one of that command's, every flag of every command
is in docs/cli.md, and the chart's NOTES.txt points at what exists (rendered with Helm when
hack/build-helm.sh already built it; checked as text otherwise).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.support import make_state
from webhook.cli import parser as cli_parser
from webhook.serve.server import build_app

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NEEDS = {"cluster", "server", "network", "build", "minutes"}
FENCE = re.compile(r"^```(sh|console|bash)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
MARKER = re.compile(r"<!--\s*needs:\s*([^>]*?)\s*-->\s*\n$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    body: str
    needs: frozenset[str]

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _blocks() -> list[Block]:
    found = []
    for path in DOCS:
        text = path.read_text("utf-8")
        for match in FENCE.finditer(text):
            marker = MARKER.search(text[: match.start()][-200:])
            needs = {n.strip() for n in marker[1].split(",")} if marker else set()
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(path, line, match[1], match[2], frozenset(needs)))
    return found


BLOCKS = _blocks()
RUNNABLE = [b for b in BLOCKS if not b.needs]


def test_the_docs_have_shell_blocks_and_markers_name_known_needs() -> None:
    assert len(BLOCKS) >= 30
    assert len(RUNNABLE) >= 2
    for block in BLOCKS:
        assert block.needs <= NEEDS, f"{block.where}: unknown needs {block.needs - NEEDS}"


def _commands(block: Block) -> str:
    """The block as a script: a console block's ``$ `` lines (and their continuations)."""
    if block.lang != "console":
        return block.body
    out: list[str] = []
    lines = block.body.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        command = lines[i][2:]
        while command.endswith("\\") or not _complete(command):
            i += 1
            assert i < len(lines), f"{block.where}: unterminated command {command!r}"
            command += "\n" + lines[i]
        out.append(command)
        i += 1
    return "\n".join(out)


def _complete(command: str) -> bool:
    try:
        shlex.split(command, comments=True)
    except ValueError:
        return False
    return True


@pytest.mark.timeout(600)
@pytest.mark.parametrize("block", RUNNABLE, ids=[b.where for b in RUNNABLE])
def test_every_unmarked_block_runs_offline(block: Block, tmp_path: Path) -> None:
    script = _commands(block)
    assert script.strip(), f"{block.where}: no command"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
        "NO_COLOR": "1",
    }
    for name in ("KUBECONFIG", "ELECTRICITY_MAPS_API_TOKEN", "WATTTIME_USERNAME"):
        env.pop(name, None)
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=540,
    )  # fmt: skip
    assert result.returncode == 0, (
        f"{block.where} exited {result.returncode}; fix it, or mark the block "
        f"<!-- needs: {'|'.join(sorted(NEEDS))} --> right before its fence\n"
        f"{script}\n--- stdout\n{result.stdout[-2000:]}\n--- stderr\n{result.stderr[-3000:]}"
    )


# ----------------------------------------------------------------------------- HTTP paths

FOREIGN = ("/version", "/-/", "/api/", "/apis/")
"""Paths of other servers the docs name (kube-apiserver, Prometheus)."""
HTTP_VERB = re.compile(r"\b(?:GET|POST|PUT|HEAD)\s+(/[\w./{}-]*)")
OWN_URL = re.compile(
    r"https?://(?:127\.0\.0\.1|localhost|carbonshift[\w.-]*)(?::[\w<>]+)?(/[\w./{}-]*)"
)
CODE_PATH = re.compile(r"`(/[\w./{}-]+)`")
SERVER_SEGMENTS = {"mutate", "healthz", "readyz", "metrics", "openapi.json", "v1", "karmada",
                   "extender"}  # fmt: skip


def _routes() -> set[str]:
    async def routes() -> set[str]:
        app = build_app(await make_state())
        return {r.resource.canonical for r in app.router.routes() if r.resource is not None}

    return asyncio.run(routes())


def _named_paths(text: str) -> set[str]:
    named = set(HTTP_VERB.findall(text)) | set(OWN_URL.findall(text))
    for path in CODE_PATH.findall(text):
        if path.strip("/").split("/")[0] in SERVER_SEGMENTS:
            named.add(path)
    return {p.rstrip(".,") for p in named if p not in ("", "/")}


def test_every_http_path_the_docs_name_is_a_route() -> None:
    routes = _routes()
    assert {"/mutate", "/readyz", "/v1/karmada/score"} <= routes
    wrong = []
    for path in DOCS:
        for named in sorted(_named_paths(path.read_text("utf-8"))):
            if named.startswith(FOREIGN) or named in routes:
                continue
            if any(r.startswith(named.rstrip("/") + "/") for r in routes):
                continue  # a prefix, e.g. the extender's urlPrefix `/v1/extender`
            wrong.append(f"{path.relative_to(ROOT)}: {named}")
    assert not wrong, f"paths the server does not serve (404): {wrong}; routes: {sorted(routes)}"


# ----------------------------------------------------------------------------- flags


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    for action in cli_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("carbonshift has no subcommands")


SUBCOMMANDS = _subparsers()
INVOCATION = re.compile(
    r"(?<![\w.-])carbonshift\s+(" + "|".join(SUBCOMMANDS) + r")\b([^`\n]*(?:\\\n[^`\n]*)*)"
)
FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def _options(sub: str) -> set[str]:
    return {o for action in SUBCOMMANDS[sub]._actions for o in action.option_strings}


def _invocations(text: str) -> list[tuple[str, str]]:
    """``(subcommand, its arguments)`` of each ``carbonshift <subcommand> ...`` in ``text``,
    cut at a comment, a pipe, ``;``, ``&&`` or a redirection."""
    out = []
    for match in INVOCATION.finditer(text):
        args = match[2].replace("\\\n", " ").replace("\\|", "/")
        args = re.split(r"\s#|\s\|\s|;|&&|\s>|\)", args)[0]
        out.append((match[1], args))
    return out


def test_every_flag_the_docs_give_a_command_is_one_of_its_options() -> None:
    wrong, seen = [], 0
    for path in [*DOCS, ROOT / "charts" / "carbonshift" / "templates" / "NOTES.txt"]:
        for sub, args in _invocations(path.read_text("utf-8")):
            for flag in FLAG.findall(args):
                seen += 1
                if flag not in _options(sub):
                    wrong.append(f"{path.relative_to(ROOT)}: carbonshift {sub} {flag}")
    assert seen >= 30
    assert not wrong, f"flags the commands do not take: {wrong}"


def test_docs_cli_names_every_flag_of_every_command() -> None:
    text = (ROOT / "docs" / "cli.md").read_text("utf-8")
    named: dict[str, set[str]] = {sub: set() for sub in SUBCOMMANDS}
    for sub, args in _invocations(text):
        named[sub] |= set(FLAG.findall(args))
    missing = []
    for sub in SUBCOMMANDS:
        for action in SUBCOMMANDS[sub]._actions:
            flags = set(action.option_strings)
            if not flags or "--help" in flags:
                continue
            if not flags & (named[sub] | set(re.findall(r"`(--?[\w-]+)", text))):
                missing.append(f"carbonshift {sub} {'/'.join(sorted(flags))}")
    assert not missing, f"docs/cli.md does not name: {missing}"


# ----------------------------------------------------------------------------- NOTES.txt

NOTES = ROOT / "charts" / "carbonshift" / "templates" / "NOTES.txt"
STALE_WORDS = ("carbon-based weights", "replica weights", 'README "Install" builds')


def _readme_sections() -> set[str]:
    text = (ROOT / "README.md").read_text("utf-8")
    return {m.strip() for m in re.findall(r"^#{2,3} (.+)$", text, re.M)}


def _check_notes(text: str) -> None:
    for words in STALE_WORDS:
        assert words not in text, f"NOTES.txt still says {words!r}"
    sections = _readme_sections()
    for named in re.findall(r'README "([^"]+)"', text):
        assert named in sections, f'NOTES.txt names README "{named}", which has no such section'
    for doc, anchor in re.findall(r"(docs/[\w.-]+\.md)(?:#([\w-]+))?", text):
        assert (ROOT / doc).is_file(), f"NOTES.txt names {doc}"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", (ROOT / doc).read_text("utf-8"), re.M)
            slugs = {re.sub(r"[^\w -]", "", h).strip().lower().replace(" ", "-") for h in headings}
            assert anchor in slugs, f"NOTES.txt names {doc}#{anchor}"
    for sub, args in _invocations(text):
        assert set(FLAG.findall(args)) <= _options(sub), f"NOTES.txt: carbonshift {sub}{args}"


def test_the_notes_name_what_exists_as_written() -> None:
    _check_notes(NOTES.read_text("utf-8"))
    assert "ordered fill" in NOTES.read_text("utf-8")


def _built_helm() -> Path | None:
    """Helm as hack/build-helm.sh left it in a binary cache; never built here."""
    caches = [os.environ.get("CARBONSHIFT_CACHE", ""), str(ROOT / ".cache" / "bin"),
              str(Path.home() / ".cache" / "carbonshift")]  # fmt: skip
    for cache in filter(None, caches):
        helm = Path(cache) / "helm"
        if helm.is_file() and os.access(helm, os.X_OK):
            return helm
    return None


@pytest.mark.parametrize(
    "values",
    [
        ("--set", "target=cluster"),
        ("-f", str(ROOT / "charts" / "carbonshift" / "ci" / "karmada-host-values.yaml")),
        ("-f", str(ROOT / "charts" / "carbonshift" / "ci" / "karmada-apiserver-values.yaml")),
    ],
    ids=["cluster", "karmada-host", "karmada-apiserver"],
)
def test_the_rendered_notes_name_what_exists(values: tuple[str, ...], tmp_path: Path) -> None:
    """NOTES.txt rendered by Helm, offline: `helm template` leaves NOTES.txt out, so a copy
    of the chart renders it as a value of a template of its own."""
    helm = _built_helm()
    if helm is None:
        pytest.skip("no Helm built (hack/build-helm.sh); NOTES.txt is checked as text above")
    chart = tmp_path / "carbonshift"
    shutil.copytree(ROOT / "charts" / "carbonshift", chart)
    (chart / "templates" / "NOTES.txt").rename(chart / "notes.src")
    (chart / "templates" / "notes.yaml").write_text(
        'notes: {{ tpl (.Files.Get "notes.src") . | toJson }}\n', "utf-8"
    )
    env = {**os.environ, "HELM_CONFIG_HOME": str(tmp_path), "HELM_CACHE_HOME": str(tmp_path)}
    result = subprocess.run(
        [str(helm), "template", "carbonshift", str(chart), "-n", "carbonshift-system",
         "--show-only", "templates/notes.yaml", *values],
        capture_output=True, text=True, check=False, timeout=120, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    notes = yaml.safe_load(result.stdout)["notes"]
    assert notes.startswith("carbonshift ")
    _check_notes(notes)
