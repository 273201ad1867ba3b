"""Syncs into a Parquet folder on a small tmpfs that fills up (``test_disk_full.py``).

Run by the test inside a private mount namespace (``unshare --mount``), so the tmpfs is
seen by this process and the syncs it starts only, and goes away with them. Steps:

1. mount a tmpfs of ``size`` on ``<workdir>/parquet``; a sync into it must succeed;
2. fill the tmpfs to the last byte, make seeded changes at the server, sync again: it must
   fail (the test checks how) and leave every Parquet file and the committed loads as
   they were, with no partial file behind;
3. free the space and sync again: it must succeed, and the files equal the server.

Prints one JSON object (each run's exit code and stderr, what changed on disk) and copies
the final Parquet files to ``<workdir>/out`` for the test to compare with the server.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import httpx


def _files(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder`` but the filler, by relative path."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name != "filler":
            out[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _loads(folder: Path) -> int:
    with duckdb.connect(str(folder / ".feedback-sync" / "work.duckdb"), read_only=True) as con:
        row = con.execute("select count(*) from feedback._dlt_loads").fetchone()
    return int(row[0]) if row else -1


def _fill(folder: Path) -> None:
    """Writes a file until the tmpfs has not one byte left (unbuffered: no late flush)."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        size = 1 << 20
        while size:
            try:
                os.write(fd, b"\0" * size)
            except OSError:
                size //= 2
    finally:
        os.close(fd)


def main() -> int:
    args: dict[str, Any] = json.loads(sys.argv[1])
    work = Path(args["workdir"])
    folder = work / "parquet"
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={args['size']}", "tmpfs", str(folder)], check=True
    )
    sync = [sys.executable, "-m", "feedback_sync.app.cli", "sync", "--destination", "parquet"]
    sync += ["--parquet-dir", str(folder), "--pipelines-dir", str(work / "pipelines")]
    sync += ["--progress-every", "3600"]
    report: dict[str, Any] = {}

    def run(name: str, *extra: str) -> None:
        done = subprocess.run([*sync, *extra], capture_output=True, text=True, timeout=600)
        report[name] = {"code": done.returncode, "stderr": done.stderr, "stdout": done.stdout}

    run("first")
    before, loads_before = _files(folder), _loads(folder)
    _fill(folder)
    report["free_bytes"] = shutil.disk_usage(folder).free
    with httpx.Client(base_url=args["control"]) as control:
        # creates and a topic update: what a normal run brings (deletes need --full)
        changes = {"followers": {"create": 3}, "comments": {"create": 4}, "topics": {"update": 1}}
        control.post("/mutate", json={"seed": 11, **changes}).raise_for_status()
    run("full")
    after = _files(folder)
    report["loads_before"], report["loads_after_failure"] = loads_before, _loads(folder)
    report["parquet_changed"] = sorted(
        name for name in before if name.endswith(".parquet") and after.get(name) != before[name]
    )
    report["new_files"] = sorted(set(after) - set(before))
    (folder / "filler").unlink()
    run("freed")
    out = work / "out"
    out.mkdir()
    for path in folder.glob("*.parquet"):
        shutil.copy(path, out / path.name)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")
    sys.exit(main())
