"""The documentation site: it builds in strict mode, its navigation and its pages are the
same set, user pages keep to what users need, and a browser shows the pages with their
navigation."""

from __future__ import annotations

import functools
import http.server
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.browser import open_page
from tests.support.site import INCLUDE, ROOT, build, build_site, copy_inputs, included_files

DOCS = ROOT / "docs"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# pages that show a contributor's file as it is (test names and folders belong there)
CONTRIBUTOR_PAGES = {"contributing.md"}


def _nav_pages(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for item in node:
            yield from _nav_pages(item)
    elif isinstance(node, dict):
        for value in node.values():
            yield from _nav_pages(value)


def _config() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    return config


def _user_pages() -> list[Path]:
    return [
        p for p in sorted(DOCS.rglob("*.md")) if str(p.relative_to(DOCS)) not in CONTRIBUTOR_PAGES
    ]


def _text_of(page: Path) -> str:
    """A page as a reader gets it: with the files it includes in place, without the HTML
    comments the reader does not see (a note for contributors may name a test there)."""
    text = page.read_text(encoding="utf-8")
    for name in INCLUDE.findall(text):
        text += "\n" + (ROOT / name).read_text(encoding="utf-8")
    return re.sub(r"<!--.*?-->", "", text, flags=re.S)


def test_every_page_is_in_the_navigation_and_every_entry_is_a_page() -> None:
    nav = list(_nav_pages(_config()["nav"]))
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert len(nav) == len(set(nav)), "a page is in the navigation twice"
    assert sorted(nav) == pages


def test_every_included_file_exists() -> None:
    included = included_files(DOCS)
    assert included, "the site includes the changelog and the results files"
    assert [str(p) for p in included if not (ROOT / p).is_file()] == []


def test_user_pages_name_no_test_and_link_nothing_outside_the_site() -> None:
    problems = []
    for page in _user_pages():
        text = _text_of(page)
        where = page.relative_to(DOCS)
        for found in re.findall(r"\btest_[a-z0-9_]{6,}\b|\btests/[\w/.]+", text):
            problems.append(f"{where}: names a test: {found}")
        for found in re.findall(r"\]\((?:\.\./)+(?:shared|README\.md|bench|tests)[^)]*\)", text):
            problems.append(f"{where}: links outside the site: {found}")
        for found in re.findall(r"process \d{3,}|127\.0\.0\.1:(?!8765\b)\d{4,5}", text):
            problems.append(f"{where}: a run's process id or port: {found}")
    assert problems == []


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    build = build_site(tmp_path_factory.mktemp("docs"))
    assert build.returncode == 0, ANSI.sub("", build.output)[-6000:]
    return build.site


@pytest.mark.slow
def test_the_site_builds_strictly_with_every_page(site: Path) -> None:
    for page in _nav_pages(_config()["nav"]):
        name = page.removesuffix(".md")
        html = site / ("index.html" if name == "index" else f"{name}/index.html")
        assert html.is_file(), page


@pytest.mark.slow
def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """Strict mode is what catches a link to a page that is not there."""
    copy_inputs(tmp_path)
    index = tmp_path / "docs" / "index.md"
    index.write_text(
        index.read_text(encoding="utf-8") + "\n[gone](tutorials/no-such-page.md)\n",
        encoding="utf-8",
    )
    broken = build(tmp_path)
    assert broken.returncode != 0
    assert "no-such-page" in ANSI.sub("", broken.output)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No line per request on the test's stderr."""


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "heading"),
    [
        ("/", "feedback-sync"),
        ("/tutorials/first-sync/", "Your first sync"),
        ("/reference/commands/", "Commands"),
    ],
)
def test_pages_render_in_chromium_with_their_navigation(
    served: str, path: str, heading: str
) -> None:
    with open_page(f"{served}{path}", width=1400) as visit:
        page = visit.page
        assert page.locator("article h1").first.inner_text().startswith(heading)
        # the site's navigation: every section of mkdocs.yml, visible beside the page
        nav = page.locator("nav.md-nav--primary")
        assert nav.count() >= 1
        nav_text = nav.first.inner_text()
        for section in ("Tutorials", "How-to guides", "Reference", "Explanation"):
            assert section in nav_text, f"{path}: {section} not in the navigation"
        assert nav.first.is_visible()
        # the theme's stylesheet applied: the header bar is laid out, not bare text
        header = page.locator("header.md-header").bounding_box()
        assert header is not None and header["width"] >= 1300 and header["height"] > 30
        # every link in the article leads to a page the server has
        hrefs = page.eval_on_selector_all(
            "article a[href]",
            "els => els.map(e => e.href).filter(h => h.startsWith(location.origin))",
        )
        for href in hrefs:
            answer = page.request.get(href.split("#", 1)[0])
            assert answer.ok, f"{path}: {href} answered {answer.status}"
        # nothing failed to load (Chromium reports that as a console error), and nothing
        # was asked of another server
        assert visit.console_errors == []
        assert [r for r in visit.requests if not r.startswith(served)] == []
        assert len(visit.requests) >= 3, "the page, its stylesheet and its script"


def test_the_readme_and_the_project_files_link_to_files_that_exist() -> None:
    """On a code host the README is read in place: its relative links must lead somewhere."""
    broken = []
    for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            if not (ROOT / target).exists():
                broken.append(f"{name}: {target}")
    assert broken == []
