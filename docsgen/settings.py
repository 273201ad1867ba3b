"""``docs/reference/settings.md``: every setting, from the declaration of each section
feedback-sync owns (``[sources.feedback]``, ``[push]``, ``[models]``, ``[report]``,
``[flows]``), then those it does not declare (``other_settings``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from docsgen import other_settings
from docsgen.markdown import code, prose, table
from docsgen.specs import Setting, from_section

INTRO = (
    "Each setting is a key in a section of `.dlt/config.toml`, or of `.dlt/secrets.toml` "
    "for a secret, or an environment variable named after its section and key the way dlt "
    "names them: `page_size` in `[sources.feedback]` is `SOURCES__FEEDBACK__PAGE_SIZE`. "
    "The environment wins over the files. [Connect your account](../how-to/connect.md) "
    "shows where the files live; a setting that is missing or malformed stops the command "
    "before any request, with one line naming it. So does a key that is not a setting in a "
    "section feedback-sync owns ({owned}), in a file or as a variable "
    "(`SOURCES__FEEDBACK__REQUESTS_PER_SECND`): the line names the file or variable and the "
    "nearest setting. dlt's own sections and other sources' are left alone. "
    "`feedback-sync check` lists every problem of the settings at once.\n\n"
    "A secret is never printed or logged ([Secrets and security]"
    "(../explanation/security.md)); keep it in `.dlt/secrets.toml` or the environment."
)


def entry(setting: Setting, with_section: bool) -> str:
    """One setting as a definition: its name, what it does, then its type, default and
    environment variable."""
    name = setting.key
    if with_section and setting.section:
        name = f"[{setting.section}] {setting.key}"
    kind = f"{setting.type}, a secret" if setting.secret else setting.type
    if setting.default == "required":
        facts = f"Type: {kind}. Required: it has no default."
    else:
        facts = f"Type: {kind}. Default: {prose(setting.default) or 'not set'}."
    if setting.section:
        facts += f" Environment variable: {code(setting.env)}."
    return f"{code(name)}\n:   {prose(setting.description)}\n\n    {facts}"


def _entries(settings: Iterable[Setting], with_section: bool) -> str:
    """An overview table (name, type, default), then each setting's definition."""
    listed = list(settings)
    overview = table(
        ("Setting" if with_section else "Key", "Type", "Default"),
        (
            (
                code(f"[{s.section}] {s.key}" if with_section and s.section else s.key),
                f"{s.type}, a secret" if s.secret else s.type,
                prose(s.default) or "not set",
            )
            for s in listed
        ),
    )
    return "\n\n".join([overview, *(entry(s, with_section) for s in listed)])


# each declared section's heading, anchor and what it is for, by its path
HEADINGS = {
    "sources.feedback": (
        "The source and the sync",
        "sources-feedback",
        "What `sync` and `check` read from the API, and how; the push uses the same "
        "address and key.",
    ),
    # a section of the same table as another is named by its dataclass
    "AccountList": (
        "Several accounts",
        "accounts",
        "Which accounts (boards) a project syncs, each into a dataset of its own: one table "
        "per account, `[sources.feedback.accounts.<name>]`, holds that account's `base_url` "
        "and `api_key` and any other setting of `[sources.feedback]` it sets for itself; "
        "what it leaves out comes from `[sources.feedback]`. With accounts configured, "
        "`[sources.feedback]` holds no `base_url` or `api_key`.",
    ),
    "push": (
        "The push",
        "push",
        "How `push` reads its curated inputs and how much it may change without `--force`.",
    ),
    "models": (
        "The SQL models",
        "models",
        "Where every command, and the Prefect flows, read the SQL models and push targets from.",
    ),
    "report": ("The dashboard", "report", "What `report` names on the page."),
    "flows": (
        "The Prefect flows",
        "flows",
        "Where the flows find the API key, and how they retry a sync "
        "(`pip install 'feedback-sync[prefect]'`).",
    ),
}


def declared_sections() -> list[tuple[str, str, str, list[Setting]]]:
    """``(heading, anchor, what the section is for, settings)`` of each declared section.

    Raises:
        ValueError: a declared section has no heading here.
    """
    from feedback_sync.app.setting_names import DECLARED

    missing = [section.path for section in DECLARED if _heading_key(section) not in HEADINGS]
    if missing:
        raise ValueError(f"docsgen/settings.py: no heading for [{'], ['.join(missing)}]")
    made = []
    for section in DECLARED:
        heading, anchor, about = HEADINGS[_heading_key(section)]
        made.append((f"{heading}: `[{section.path}]`", anchor, about, from_section(section)))
    return made


def _heading_key(section: Any) -> str:
    """A section's key in ``HEADINGS``: its path, or its dataclass's name where another
    section of the same path comes first."""
    from feedback_sync.app.setting_names import DECLARED

    first = next(other for other in DECLARED if other.path == section.path)
    return section.path if first is section else section.checked.__name__


def render() -> str:
    """The page's body."""
    from feedback_sync.app.setting_names import OWNED

    parts = [INTRO.format(owned=", ".join(f"`[{path}]`" for path in OWNED))]
    for heading, anchor, about, settings in declared_sections():
        parts += [f"## {heading} {{#{anchor}}}", about, _entries(settings, False)]
    others = other_settings.settings()
    parts += [
        "## Other settings {#other}",
        "dlt's own settings, which feedback-sync reads too: where the destinations are, and "
        "two it chooses a value for.",
        _entries((s for s in others if s.section), True),
        "## Environment variables only {#environment}",
        "These have no key in the settings files.",
        _entries((s for s in others if not s.section), False),
    ]
    return "\n\n".join(parts)
