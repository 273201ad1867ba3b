"""A key that is not a setting, in a section feedback-sync owns, is refused in one line that
names the file or variable, the key and the nearest setting (exit 2, nothing fetched or
written), by every command; ``check`` lists every problem of the settings at once."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from feedback_sync.api.config import spec_of
from feedback_sync.app.setting_names import DECLARED, OWNED, known_names, unknown_settings
from feedback_sync.sandbox.server import RunningSandbox

from tests.support.cli import CLI, cli_env, said_lines
from tests.sync.harness import Harness

COMMANDS = ["sync", "status", "models", "report", "push"]


def _run(
    cwd: Path, env: dict[str, str], *args: str, config: str | None = None
) -> subprocess.CompletedProcess[str]:
    if config is not None:
        (cwd / ".dlt").mkdir(exist_ok=True)
        (cwd / ".dlt" / "config.toml").write_text(config)
    return subprocess.run(
        [*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_names_are_the_fields_dlt_resolves() -> None:
    """Each owned section's names are those of the spec dlt resolves it with, both made
    from its declaration; ``[history]`` has none."""
    paths = list(dict.fromkeys(section.path for section in DECLARED))
    assert paths == [s for s in OWNED if s != "history"]
    for path in paths:
        fields = {
            name
            for section in DECLARED
            if section.path == path
            for name in spec_of(section).get_resolvable_fields()
        }
        assert known_names(path) == fields
        assert known_names(path), path
    assert known_names("history") == set()


def test_no_setting_of_an_owned_section_is_read_past_its_declaration() -> None:
    """A key of an owned section read with ``dlt.config.get("<section>.<name>")`` (or named
    in a constant ``..._SETTING``) would be a setting no declaration holds: unchecked,
    undocumented and refused as unknown. Every one is read through its section's
    declaration (``api/config.load``)."""
    import re

    package = Path(__file__).parents[2] / "pipelines" / "feedback_sync"
    sections = "|".join(re.escape(s) for s in OWNED)
    pattern = rf"""(?:config\.get\(|secrets\.get\(|_SETTING = )["']({sections})\.(\w+)["']"""
    assert re.findall(pattern, 'dlt.config.get("models.sql_dir")') == [("models", "sql_dir")]
    read = set()
    for path in package.rglob("*.py"):
        read |= {(path.name, *found) for found in re.findall(pattern, path.read_text())}
    assert read == set()


@pytest.mark.parametrize("command", COMMANDS)
def test_a_misspelled_key_in_a_file_stops_every_command(
    harness: Harness, tmp_path: Path, command: str
) -> None:
    env = cli_env(harness.server, tmp_path)
    harness.mark_requests()
    done = _run(
        tmp_path,
        env,
        command,
        config="[runtime]\ndlthub_telemetry = false\n\n"
        "[sources.feedback]\nrequests_per_secnd = 5\n",
    )
    assert done.returncode == 2, done.stderr
    assert said_lines(done.stderr) == [
        f"feedback-sync {command}: error: .dlt/config.toml: [sources.feedback] "
        "requests_per_secnd is not a feedback-sync setting; did you mean requests_per_second?"
    ]
    assert harness.requests() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [".dlt"]  # nothing written


def test_a_misspelled_variable_names_the_variable_and_the_nearest(
    harness: Harness, tmp_path: Path
) -> None:
    env = cli_env(harness.server, tmp_path, SOURCES__FEEDBACK__REQUESTS_PER_SECND="5")
    harness.mark_requests()
    done = _run(tmp_path, env, "sync")
    assert done.returncode == 2
    assert said_lines(done.stderr) == [
        "feedback-sync sync: error: the environment variable "
        "SOURCES__FEEDBACK__REQUESTS_PER_SECND is not a feedback-sync setting; did you mean "
        "SOURCES__FEEDBACK__REQUESTS_PER_SECOND?"
    ]
    assert harness.requests() == []


@pytest.mark.parametrize(
    ("config", "said"),
    [
        (
            "[models]\nsql_folder = 'sql'\n",
            "[models] sql_folder is not a feedback-sync setting; did you mean sql_dir?",
        ),
        (
            "[push]\nsample_sise = 3\n",
            "[push] sample_sise is not a feedback-sync setting; did you mean sample_size?",
        ),
        (
            "[report]\ncurrencey = 'EUR'\n",
            "[report] currencey is not a feedback-sync setting; did you mean currency?",
        ),
        (
            "[flows]\nsync_retry = 2\n",
            "[flows] sync_retry is not a feedback-sync setting; did you mean sync_retries?",
        ),
        (
            "[history]\nideas = false\n",
            "[history] ideas is not a feedback-sync setting; did you mean history_ideas in "
            "[sources.feedback]?",
        ),
    ],
)
def test_each_owned_section_is_checked(tmp_path: Path, config: str, said: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(config)
    (found,) = unknown_settings([path], {})
    assert found.message() == f"{path}: {said}"


def test_dlts_own_sections_and_other_sources_are_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "[runtime]\nlog_level = 'WARNING'\n[load]\nworkers = 3\n[normalize]\nworkers = 1\n"
        "[destination.duckdb]\ncredentials = 'x.duckdb'\n[sources.github]\ntoken_name = 'x'\n"
        "[sources.feedback]\nbase_url = 'http://127.0.0.1/v1'\npage_size = 5\n"
        "[sources.feedback_other]\nanything = 1\n[feedback_sync.load]\nworkers = 2\n"
    )
    environ = {
        "SOURCES__GITHUB__TOKEN": "x",
        "LOAD__WORKERS": "2",
        "SOURCES__FEEDBACK__PAGE_SIZE": "5",
        "PUSHOVER_TOKEN": "x",  # shares no prefix: PUSH__ has two underscores
        "SOURCES__FEEDBACKS__X": "1",
    }
    assert unknown_settings([path], environ) == []
    assert set(OWNED) == {"sources.feedback", "models", "push", "report", "flows", "history"}


def test_check_lists_every_problem_at_once(live_sandbox: RunningSandbox, tmp_path: Path) -> None:
    env = cli_env(live_sandbox, tmp_path)
    del env["SOURCES__FEEDBACK__API_KEY"]
    env["SOURCES__FEEDBACK__DELETE_MODE"] = "hardest"
    env["PUSH__SAMPLE_SISE"] = "3"
    env["SOURCES__FEEDBACK__ALLOW_INSECURE_HTTP"] = "maybe"  # a spec field no dataclass holds
    done = _run(
        tmp_path,
        env,
        "check",
        config="[sources.feedback]\npage_sise = 5\nmax_concurrency = 0\ntimeout_seconds = 'soon'\n",
    )
    assert done.returncode == 2, done.stderr
    out = done.stdout
    for problem in (
        ".dlt/config.toml: [sources.feedback] page_sise is not a feedback-sync setting; "
        "did you mean page_size?",
        "the environment variable PUSH__SAMPLE_SISE is not a feedback-sync setting; did you "
        "mean PUSH__SAMPLE_SIZE?",
        "missing setting SOURCES__FEEDBACK__API_KEY",
        "SOURCES__FEEDBACK__DELETE_MODE (delete_mode in [sources.feedback]) must be one of",
        "SOURCES__FEEDBACK__MAX_CONCURRENCY (max_concurrency in [sources.feedback]) must be",
        "SOURCES__FEEDBACK__TIMEOUT_SECONDS (timeout_seconds in [sources.feedback]) must be",
        "SOURCES__FEEDBACK__ALLOW_INSECURE_HTTP (allow_insecure_http in [sources.feedback]) "
        "must be true or false",
    ):
        assert problem in out, out
    assert "7 problems:" in out
    assert not (tmp_path / "data").exists()
