"""A settings file that does not parse: every command says which file, which line and what
is wrong, in one line, exit 2, and leaves nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from feedback_sync.app.failures import explain

CLI = [str(Path(sys.executable).with_name("feedback-sync"))]
BROKEN = '[sources.feedback]\nbase_url = "http://127.0.0.1:9/v1\npage_size = 5\n'


def _run(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DLT_"))}
    return subprocess.run(
        [*CLI, *args, "--pipelines-dir", str(cwd / "pipelines")],
        cwd=cwd,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("command", ["sync", "status", "models", "report", "push"])
@pytest.mark.parametrize("name", ["config.toml", "secrets.toml"])
def test_a_file_that_does_not_parse_is_one_line(tmp_path: Path, command: str, name: str) -> None:
    (tmp_path / ".dlt").mkdir()
    (tmp_path / ".dlt" / name).write_text(BROKEN)
    done = _run(tmp_path, command)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"feedback-sync {command}: error: .dlt/{name} is not valid TOML: "
        "Illegal character '\\n' (at line 2, column 34)"
    ]
    assert done.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == [".dlt"]  # nothing written


def test_the_project_dir_named_is_the_one_checked(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".dlt").mkdir(parents=True)
    (project / ".dlt" / "config.toml").write_text("[runtime\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = _run(elsewhere, "--project-dir", str(project), "status")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"feedback-sync status: error: {project}/.dlt/config.toml is not")
    assert "(at line 1" in line


@pytest.mark.parametrize("root", [False, True])
def test_the_global_settings_folder_is_checked_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, root: bool
) -> None:
    """dlt's global folder: ~/.dlt, or /var/dlt when running as root."""
    from feedback_sync.app import settings_files
    from feedback_sync.errors import ConfigError

    home = tmp_path / "home"
    (home / ".dlt").mkdir(parents=True)
    (home / ".dlt" / "secrets.toml").write_text("key = = 1\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DLT_PROJECT_DIR", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 0 if root else 1000)
    if root:
        assert settings_files._global_dir() == Path("/var/dlt")
        assert home / ".dlt" / "secrets.toml" not in settings_files.settings_files()
        return
    with pytest.raises(ConfigError) as failure:
        settings_files.check_settings_files()
    assert str(failure.value).startswith(f"{home}/.dlt/secrets.toml is not valid TOML: ")


def test_dlts_own_read_error_is_one_line_too() -> None:
    """The fallback, should dlt read a file the check did not."""
    from dlt.common.configuration.providers.toml import TomlProviderReadException

    error = TomlProviderReadException(
        "config.toml", "config.toml", ["/x/.dlt/config.toml"], "Unexpected character at line 4"
    )
    message, code = explain(error)
    assert code == 2
    assert message == (
        "config.toml (/x/.dlt/config.toml) is not valid TOML: Unexpected character at line 4"
    )
