"""Every relative link in README.md and docs/*.md leads somewhere: the file exists, and a ``#anchor`` into a
markdown file names one of its headings (as GitHub makes heading anchors). The README sends readers to
docs/ pages one topic each, so a moved or renamed section must not leave a dead link behind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: ``[text](target)`` and ``![alt](target)``; a target ends at whitespace or the closing parenthesis
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _outside_code(text: str, blank_code: bool = False) -> list[str]:
    """The lines outside fenced code blocks; ``blank_code`` empties inline code spans (a ``[x](y)`` there is code)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"`[^`]*`", "``", line) if blank_code else line)
    return lines


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lowercased, punctuation but ``-`` and ``_`` dropped, spaces to ``-``,
    a repeated one suffixed ``-1``, ``-2``..."""
    seen: dict[str, int] = {}
    found = set()
    for line in _outside_code(path.read_text(encoding="utf-8")):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def links() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for line in _outside_code(doc.read_text(encoding="utf-8"), blank_code=True):
            for target in _LINK.findall(line):
                if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
                    found.append((doc.relative_to(ROOT).as_posix(), target))
    return found


def test_the_docs_have_relative_links():
    assert len(links()) > 30


def test_every_relative_link_names_an_existing_file_and_heading():
    dead = []
    for doc, target in links():
        where, _, anchor = target.partition("#")
        path = (ROOT / doc).parent / where if where else ROOT / doc
        if not path.exists():
            dead.append(f"{doc}: {target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            dead.append(f"{doc}: {target}: no heading #{anchor} in {path.relative_to(ROOT).as_posix()}")
    assert dead == []


@pytest.mark.parametrize("heading, anchor", [
    ("## From Python: model objects, your tests, notebooks", "from-python-model-objects-your-tests-notebooks"),
    ("### Your script under `--ddp`", "your-script-under---ddp"),
    ("## This project's own CI", "this-projects-own-ci"),
    ("## FSDP2 (`fully_shard`)", "fsdp2-fully_shard"),
])
def test_anchors_are_made_as_github_makes_them(tmp_path, heading, anchor):
    page = tmp_path / "page.md"
    page.write_text(f"{heading}\n\n```\n# not a heading\n```\n", encoding="utf-8")
    assert anchors(page) == {anchor}
