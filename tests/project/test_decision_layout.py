"""The decision core's inner order holds: every top-level module of ``webhook/decision``
is either one of the technologies or the hooks above them, or named in the core's import
contract (so a new core module cannot escape it), and no module hides an import cycle
behind ``TYPE_CHECKING``."""

from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DECISION = ROOT / "webhook" / "decision"
ABOVE_THE_CORE = {"clusters", "ocm", "kueue"}


def _contract(name: str) -> configparser.SectionProxy:
    parser = configparser.ConfigParser()
    parser.read(ROOT / ".importlinter")
    return parser[f"importlinter:contract:{name}"]


def test_every_core_module_is_held_by_the_core_contract() -> None:
    held = {
        line.strip().rsplit(".", 1)[-1]
        for line in _contract("decision-core")["source_modules"].split()
    }
    modules = {p.stem for p in DECISION.glob("*.py") if p.stem != "__init__"}
    assert sorted(modules - held - ABOVE_THE_CORE) == []
    assert sorted(held - modules) == []


def test_the_technologies_are_packages_or_modules_the_contracts_name() -> None:
    independent = {line.strip() for line in _contract("decision-technologies")["modules"].split()}
    packages = {
        f"webhook.decision.{p.name}" for p in DECISION.iterdir() if (p / "__init__.py").is_file()
    }
    assert packages <= independent


def test_no_type_only_imports_in_the_decision_core() -> None:
    hidden = [
        str(p.relative_to(ROOT)) for p in DECISION.rglob("*.py") if "TYPE_CHECKING" in p.read_text()
    ]
    assert hidden == []
