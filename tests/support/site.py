"""The documentation site, built the way ``./run docs`` builds it, into a folder of the test's.

The build runs on a copy of what it reads (``mkdocs.yml``, ``docs/`` and the files the
pages include with ``--8<--``), so a test never writes into the checkout and tests on
several workers do not share an output folder. Zensical's ``--strict`` turns every warning
(a link to a missing page or anchor) into a failed build; a missing include fails it too.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = re.compile(r'^--8<-- "([^"]+)"\s*$', re.M)


@dataclass
class Build:
    returncode: int
    output: str
    site: Path


def included_files(docs: Path) -> list[Path]:
    """The repository's files that pages include (``--8<-- "path"``), relative to the root."""
    found = {
        Path(name)
        for page in sorted(docs.rglob("*.md"))
        for name in INCLUDE.findall(page.read_text(encoding="utf-8"))
    }
    return sorted(found)


def copy_inputs(workdir: Path, root: Path = ROOT) -> None:
    """What the build reads, from ``root`` into ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(root / "mkdocs.yml", workdir / "mkdocs.yml")
    shutil.copytree(root / "docs", workdir / "docs", dirs_exist_ok=True)
    for name in included_files(root / "docs"):
        if (root / name).is_file():
            (workdir / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, workdir / name)


def build(workdir: Path) -> Build:
    """Builds the site of ``workdir`` (a copy) strictly; the site is ``workdir/site``."""
    zensical = Path(sys.executable).with_name("zensical")
    done = subprocess.run(
        [str(zensical), "build", "--strict", "--clean"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "HOME": str(workdir)},
    )
    return Build(done.returncode, done.stdout + done.stderr, workdir / "site")


def build_site(workdir: Path, root: Path = ROOT) -> Build:
    """Builds ``root``'s site strictly in a copy under ``workdir``."""
    copy_inputs(workdir, root)
    return build(workdir)
