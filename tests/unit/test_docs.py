"""The documentation: README.md short and its links alive, docs/ a site MkDocs builds with --strict (every link
and anchor checked, mkdocs.yml's `validation`), and every page of docs/ in the site's nav."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS_YML = ROOT / "mkdocs.yml"
README_MAX_LINES = 320

# [text](target) and ![alt](target); a target ends at whitespace or ')'. Code spans and fences are dropped first.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code spans, where a bracket is not a link."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def relative_links(text: str) -> list[str]:
    return [t for t in LINK.findall(_prose(text)) if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def _anchors(md_file: Path) -> set[str]:
    """The heading ids MkDocs gives a page (Python-Markdown's toc slugify, which GitHub's agrees with here)."""
    from markdown.extensions.toc import slugify

    ids = set()
    for line in _prose(md_file.read_text()).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            ids.add(slugify(re.sub(r"[*_`]", "", m.group(1)), "-"))
    return ids


def broken_links(md_file: Path) -> list[str]:
    broken = []
    for target in relative_links(md_file.read_text()):
        path, _, anchor = target.partition("#")
        dest = (md_file.parent / path).resolve()
        if not dest.exists():
            broken.append(f"{target}: no such file {dest}")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading with id '{anchor}' in {dest.name}")
    return broken


def _nav_files(nav) -> list[str]:
    out = []
    for item in nav:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            for value in item.values():
                out.extend(_nav_files(value) if isinstance(value, list) else [value])
    return out


def test_the_site_builds_with_strict_checks(tmp_path):
    """mkdocs.yml's `validation` makes a missing page, a broken link or anchor a warning; --strict fails on it."""
    cfg = yaml.safe_load(MKDOCS_YML.read_text())
    links = cfg["validation"]["links"]
    assert links["not_found"] == "warn" and links["anchors"] == "warn", links
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(MKDOCS_YML),
                           "-d", str(tmp_path / "site")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    if proc.returncode != 0:
        print(proc.stderr)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").exists()


def test_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move text to docs/"


def test_every_relative_link_in_the_readme_points_to_a_file():
    assert relative_links(README.read_text()), "README.md links to no page of docs/"
    assert broken_links(README) == []


def test_the_readme_keeps_the_two_commands_and_links_every_page():
    text = README.read_text()
    assert "bash scripts/demo.sh" in text and "bash scripts/test.sh" in text
    linked = {Path(t.partition("#")[0]).name for t in relative_links(text) if t.startswith("docs/")}
    pages = {p.name for p in DOCS.glob("*.md")} - {"kuberay-guide.md"}  # the guide is kuberay/README.md itself
    assert pages <= linked, f"pages README.md does not link to: {sorted(pages - linked)}"


def test_every_page_of_docs_is_in_the_nav():
    cfg = yaml.safe_load(MKDOCS_YML.read_text())
    assert cfg["site_name"] == "availproof" and cfg["docs_dir"] == "docs"
    nav = _nav_files(cfg["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert [p for p in pages if p not in nav] == []
    assert [p for p in nav if not (DOCS / p).exists()] == []


def test_the_overview_table_of_readme_and_docs_index_is_the_same():
    def table(text):  # the first table: its contiguous rows
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("| ") and "|" in line[2:])
        return list(itertools.takewhile(lambda line: line.startswith("|"), lines[start:]))

    readme, index = table(README.read_text()), table((DOCS / "index.md").read_text())
    assert readme and readme[0].startswith("| experiment | scope | verdict")
    assert readme == index


@pytest.mark.parametrize("target, why", [("docs/no-such-page.md", "no such file"),
                                         ("docs/findings.md#no-such-heading", "no heading")])
def test_a_broken_link_is_found(tmp_path, target, why):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "findings.md").write_text("# Findings\n\n## A finding\n")
    md = tmp_path / "README.md"
    md.write_text(f"# x\n\n[ok](docs/findings.md#a-finding) `[code](nowhere.md)`\n\n[bad]({target})\n")
    problems = broken_links(md)
    assert len(problems) == 1 and why in problems[0], problems
