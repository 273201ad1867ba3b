"""``feedback-sync init``: a project's ``.dlt/config.toml`` and ``.dlt/secrets.toml``, from the
templates the package ships (``app/templates/``; the repository's own ``.dlt/`` links to
them), never over a file that exists; the secrets file is made readable by its owner only
and, in a git repository, git-ignored."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from feedback_sync.errors import ConfigError
from feedback_sync.package_data import package_path

TEMPLATES = {"config.toml": 0o644, "secrets.toml": 0o600}
IGNORED = ".dlt/secrets.toml"


@dataclass
class Initialised:
    project: Path
    written: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    ignored_in: Path | None = None  # the .gitignore that got the secrets file's line

    def summary(self) -> str:
        lines = [f"init: project folder {self.project}"]
        lines += [f"  wrote {path}" for path in self.written]
        lines += [f"  kept  {path} (it exists; nothing was changed)" for path in self.kept]
        if self.ignored_in is not None:
            lines.append(f"  added {IGNORED} to {self.ignored_in}")
        config = self.project / ".dlt" / "config.toml"
        secrets = self.project / ".dlt" / "secrets.toml"
        lines += [
            "Next:",
            f"  1. set base_url in {config} (the service's address, ending in /v1)",
            f"  2. set api_key in {secrets} (or SOURCES__FEEDBACK__API_KEY)",
            "  3. feedback-sync check    (tests the settings, the API and the warehouse)",
            "  4. feedback-sync sync",
        ]
        return "\n".join(lines)


def init(project: Path) -> Initialised:
    """Writes the templates into ``project/.dlt/`` where no file is.

    Raises:
        ConfigError: ``project`` is not a folder, or a file cannot be written there.
    """
    if project.exists() and not project.is_dir():
        raise ConfigError(f"{project} is a file, not a project folder")
    done = Initialised(project=project)
    folder = project / ".dlt"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, mode in TEMPLATES.items():
            path = folder / name
            if path.exists() or path.is_symlink():
                done.kept.append(path)
                continue
            _write_new(package_path("app", "templates", name), path, mode)
            done.written.append(path)
        done.ignored_in = _git_ignore(project)
    except OSError as exc:
        raise ConfigError(f"cannot write {exc.filename or folder}: {exc.strerror}") from None
    return done


def _write_new(template: Path, path: Path, mode: int) -> None:
    """``template``'s text as the new file ``path`` (``O_EXCL``: a file made meanwhile is
    not overwritten), whole or not at all."""
    text = template.read_bytes()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text)
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _git_ignore(project: Path) -> Path | None:
    """Adds the secrets file to ``project/.gitignore`` when ``project`` is in a git
    repository and git does not ignore it yet; the file changed, else None."""
    root = next(
        (p for p in (project.resolve(), *project.resolve().parents) if (p / ".git").exists()), None
    )
    if root is None:
        return None
    secrets = project / IGNORED
    git = shutil.which("git")
    if git is not None:
        checked = subprocess.run(
            [git, "check-ignore", "--quiet", "--no-index", str(secrets.resolve())],
            cwd=project,
            capture_output=True,
            timeout=30,
        )
        if checked.returncode == 0:  # already ignored by some rule
            return None
    ignore = project / ".gitignore"
    existing = ignore.read_text(encoding="utf-8") if ignore.exists() else ""
    if any(line.strip() in (IGNORED, f"/{IGNORED}") for line in existing.splitlines()):
        return None
    prefix = "" if not existing or existing.endswith("\n") else "\n"
    with ignore.open("a", encoding="utf-8") as f:
        f.write(f"{prefix}# feedback-sync: the API key and other secrets\n{IGNORED}\n")
    return ignore
