"""``make bench`` writes each table into the page that holds its markers."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import harness


def test_a_table_goes_to_the_page_with_its_markers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "docs").mkdir()
    readme, page = tmp_path / "README.md", tmp_path / "docs" / "benchmarks.md"
    readme.write_text("# carbonshift\n")
    page.write_text("x\n<!-- bench:admission:start -->\nold\n<!-- bench:admission:end -->\ny\n")
    monkeypatch.setattr(harness, "ROOT", tmp_path)
    monkeypatch.setattr(harness, "README", readme)
    harness.write_table("admission", "| new |")
    assert page.read_text() == (
        "x\n<!-- bench:admission:start -->\n| new |\n<!-- bench:admission:end -->\ny\n"
    )
    assert readme.read_text() == "# carbonshift\n"
    harness.write_table("nowhere", "| t |")
    assert "no page has a <!-- bench:nowhere:start --> marker" in capsys.readouterr().err


def test_every_benchmark_has_its_markers_in_the_docs() -> None:
    pages = [harness.README, *sorted((harness.ROOT / "docs").glob("*.md"))]
    text = "".join(p.read_text() for p in pages)
    for name in ("admission", "score", "soak", "fleet", "reevaluate", "schedule"):
        assert f"<!-- bench:{name}:start -->" in text, name
