"""``docs/reference/settings.md``: every setting, from the declaration of the source's
(``[sources.feedback]``) and the configuration spec of the push (``[push]``), then the
settings read one by one (``other_settings``)."""

from __future__ import annotations

from collections.abc import Iterable

from docsgen import other_settings
from docsgen.markdown import code, prose, table
from docsgen.specs import Setting, from_section, from_spec

INTRO = (
    "Each setting is a key in a section of `.dlt/config.toml`, or of `.dlt/secrets.toml` "
    "for a secret, or an environment variable named after its section and key the way dlt "
    "names them: `page_size` in `[sources.feedback]` is `SOURCES__FEEDBACK__PAGE_SIZE`. "
    "The environment wins over the files. [Connect your account](../how-to/connect.md) "
    "shows where the files live; a setting that is missing or malformed stops the command "
    "before any request, with one line naming it. So does a key that is not a setting in a "
    "section feedback-sync owns (`[sources.feedback]`, `[models]`, `[push]`, `[report]`, "
    "`[flows]`, `[history]`), in a file or as a variable "
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


def spec_sections() -> list[tuple[str, str, str, list[Setting]]]:
    """``(heading, anchor, what the section is for, settings)`` of each declared section
    and configuration spec."""
    from feedback_sync.api import settings as source
    from feedback_sync.push import settings as push
    from feedback_sync.push.settings import PushConfiguration

    return [
        (
            f"The source and the sync: `[{source.SECTION}]`",
            "sources-feedback",
            "What `sync` and `check` read from the API, and how; the push uses the same "
            "address and key.",
            from_section(source.SOURCE),
        ),
        (
            f"The push: `[{push.SECTION}]`",
            "push",
            "How `push` reads its curated inputs and how much it may change without `--force`.",
            from_spec(push.SECTION, PushConfiguration, push.PushSettings),
        ),
    ]


def render() -> str:
    """The page's body."""
    parts = [INTRO]
    for heading, anchor, about, settings in spec_sections():
        parts += [f"## {heading} {{#{anchor}}}", about, _entries(settings, False)]
    others = other_settings.settings()
    parts += [
        "## Other settings {#other}",
        "Read where they are used: the SQL folder, the dashboard, the Prefect flows, and "
        "dlt's own settings for the destinations, which feedback-sync reads too.",
        _entries((s for s in others if s.section), True),
        "## Environment variables only {#environment}",
        "These have no key in the settings files.",
        _entries((s for s in others if not s.section), False),
    ]
    return "\n\n".join(parts)
