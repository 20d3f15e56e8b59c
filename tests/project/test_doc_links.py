"""Every relative link in the README and docs/ reaches a file, and its anchor a heading."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(title: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    fence, found = False, set()
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"^#{1,6} ", line):
            found.add(_slug(line.lstrip("#")))
    return found


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for match in LINK.finditer(page.read_text("utf-8")):
            link = match.group(1)
            if re.match(r"^[a-z]+:", link):
                continue
            path, _, anchor = link.partition("#")
            target = (page.parent / path).resolve() if path else page
            if not target.exists():
                broken.append(f"{page.relative_to(ROOT)}: {link}")
            elif anchor and target.suffix == ".md" and anchor not in _anchors(target.read_text()):
                broken.append(f"{page.relative_to(ROOT)}: {link} (no such heading)")
    assert broken == []


def test_the_readme_links_every_page_in_docs() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    linked = {m.group(1) for m in re.finditer(r"\]\(docs/([\w.-]+\.md)", readme)}
    assert sorted(pages - linked) == []
