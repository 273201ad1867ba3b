"""``feedback-sync init`` writes a config.toml that names every setting of each declared
section (``[sources.feedback]``, ``[push]``, ``[models]``, ``[report]``, ``[flows]``), each
in its section, written from the declarations the settings reference is generated from."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from feedback_sync.package_data import package_path

from docsgen import templates
from docsgen.pages import ROOT
from docsgen.settings import declared_sections


def _keys_by_section() -> dict[str, set[str]]:
    text = package_path("app", "templates", "config.toml").read_text(encoding="utf-8")
    found: dict[str, set[str]] = {}
    section = ""
    for line in text.splitlines():
        header = re.match(r"^#?\s*\[([\w.]+)\]", line)
        if header:
            section = header.group(1)
            continue
        key = re.match(r"^#?\s*(\w+)\s*=", line)
        if key:
            found.setdefault(section, set()).add(key.group(1))
    return found


def test_the_template_names_every_declared_setting_in_its_section() -> None:
    template = _keys_by_section()
    wanted = [
        (s.section, s.key)
        for _heading, _anchor, _about, settings in declared_sections()
        for s in settings
        if not s.secret  # the API key belongs in secrets.toml
    ]
    assert {section for section, _key in wanted} == {
        "sources.feedback",
        "push",
        "models",
        "report",
        "flows",
    }
    assert len(wanted) > 25
    missing = [
        f"[{section}] {key}" for section, key in wanted if key not in template.get(section, set())
    ]
    assert missing == []


def test_the_secrets_template_holds_the_key_and_nothing_else_of_the_specs() -> None:
    text = package_path("app", "templates", "secrets.toml").read_text(encoding="utf-8")
    assert re.search(r"^#?\s*api_key\s*=", text, re.M)


def test_the_templates_tables_are_what_the_declaration_makes() -> None:
    """``./run docs`` writes each declared section's lines of both templates from its
    declaration; the committed templates are current."""
    assert [t.path for t in templates.stale(ROOT)] == [], "run ./run docs and commit"


def test_a_declared_setting_is_a_line_of_its_template() -> None:
    from feedback_sync.api.declaration import Integer, Section, Text, setting

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Declared:
        token: str = setting(Text(), secret=True, doc="A token.", note="required: a token")
        rows: int = setting(Integer(1, 9), default=3, doc="Rows.", note="rows per request")
        cap: int | None = setting(Integer(1, 9), default=None, doc="A cap.", note="", example=4)

    section = Section("sources.feedback", Declared)
    text = "# head\n\n[sources.feedback]\nold = 1\n\n[push]\n"
    assert templates.rewrite(text, section, secrets=False).split("\n") == [
        "# head",
        "",
        "[sources.feedback]",
        "rows = 3                            # rows per request",
        "# cap = 4",
        "",
        "[push]",
        "",
    ]
    assert templates.rewrite(text, section, secrets=True).split("\n")[3] == (
        'token = ""                          # required: a token'
    )


def test_a_header_may_carry_a_comment_and_a_path_is_written_as_text() -> None:
    from feedback_sync.api.declaration import Folder, Section, Text, setting

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Declared:
        folder: Path = setting(Folder(), default=Path("data/x"), doc="A folder.", note="")

    section = Section("flows", Declared)
    text = "[flows]   # the flows (pip install 'x[prefect]')\n# old = 1\n"
    assert templates.rewrite(text, section, secrets=False) == (
        "[flows]   # the flows (pip install 'x[prefect]')\nfolder = \"data/x\"\n"
    )
    # no secret of the section: a template without its header is left as it is
    assert templates.rewrite("[other]\n", section, secrets=True) == "[other]\n"

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Unshown:
        name: str | None = setting(Text(), default=None, doc="A name.")

    with pytest.raises(ValueError, match="name needs an example"):
        templates.rewrite(text, Section("flows", Unshown), secrets=False)
