"""The user documentation holds together: every relative link and every file path that
README.md and docs/ cite exists (anchors included), the README stays a few screens long, and
no development history leaks into user docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS, ROOT / "examples" / "README.md"]
IDS = [str(p.relative_to(ROOT)) for p in PAGES]
# Where a cited path may be rooted: the repository, the package's source, the docs folder.
BASES = (ROOT, ROOT / "operator" / "src", ROOT / "operator" / "src" / "tokenfleet", ROOT / "docs")
EXTENSIONS = (".py", ".yaml", ".yml", ".md", ".csv", ".json", ".lua", ".txt", ".toml", ".png")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
HISTORY = re.compile(
    r"\bsession \d+|\bat commit [0-9a-f]{7}|[Tt]ried and not kept|\bissue[- ]\d+\b|"
    r"github\.com/example"
)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {_slug(m) for m in re.findall(r"^#+ (.+)$", text, re.M)}


def _links(page: Path) -> list[str]:
    return [
        target
        for target in LINK.findall(FENCE.sub("", page.read_text()))
        if not re.match(r"^[a-z]+://", target) and not target.startswith("mailto:")
    ]


def _cited_paths(page: Path) -> list[str]:
    """Paths in `code spans` and code blocks that name a file or a folder of the tree."""
    text = page.read_text()
    # In code spans a folder ends with "/"; in code blocks (commands, tree drawings) only
    # file names count.
    tokens = [(t, True) for t in CODE.findall(FENCE.sub("", text))]
    for block in FENCE.findall(text):
        tokens += [(t, False) for t in re.findall(r"[\w./-]+", block)]
    found = []
    for token, folders in tokens:
        token = token.strip()
        if " " in token or any(c in token for c in ":$<>*{}=@,"):
            continue
        if "/" not in token or token.startswith(("/", "-", "~")) or "." in token.split("/")[0]:
            continue  # not a path, an absolute one, a flag, or a host name (ghcr.io/...)
        if token.endswith(EXTENSIONS) or (folders and token.endswith("/")):
            found.append(token.rstrip("/"))
    return found


def _exists(path: str, page: Path) -> bool:
    return any((base / path).exists() for base in (page.parent, *BASES))


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in _links(page):
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in _anchors(dest)):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_cited_file_exists(page: Path) -> None:
    missing = sorted({p for p in _cited_paths(page) if not _exists(p, page)})
    assert not missing, f"{page.relative_to(ROOT)} cites files the repository lacks: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_no_development_history(page: Path) -> None:
    hits = [m.group(0) for m in HISTORY.finditer(page.read_text())]
    assert not hits, f"{page.relative_to(ROOT)}: {hits}"


def test_the_readme_is_a_few_screens() -> None:
    assert len((ROOT / "README.md").read_bytes()) < 15_000


def test_the_index_links_every_doc() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    linked = {Path(t.partition("#")[0]).name for t in _links(ROOT / "docs" / "README.md")}
    unlisted = sorted(p.name for p in DOCS if p.name != "README.md" and p.name not in linked)
    assert not unlisted, f"docs/README.md does not link {unlisted}"
    assert index.startswith("# ")


def test_the_checker_catches_a_broken_link_and_a_missing_file(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("[x](nowhere.md) and `operator/src/tokenfleet/nowhere.py`\n## A B\n[y](#a-b)\n")
    assert _links(page) == ["nowhere.md", "#a-b"]
    assert not _exists("operator/src/tokenfleet/nowhere.py", page)
    assert _exists("operator/src/tokenfleet/cli.py", page)
    assert _anchors(page) == {"a-b"}
