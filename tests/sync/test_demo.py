"""``feedback-sync demo`` end to end (at tiny scale, in a temporary folder)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from feedback_sync.app.cli import main


@pytest.mark.slow
def test_demo_runs_a_full_then_a_normal_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    # a user's own warehouse and dashboard in the same folder stay as they were
    (tmp_path / "data").mkdir()
    mine = {"warehouse.duckdb": b"my warehouse", "report.html": b"<p>my dashboard</p>"}
    for name, body in mine.items():
        (tmp_path / "data" / name).write_bytes(body)
    assert main(["demo", "--scale", "tiny"]) == 0
    for name, body in mine.items():
        assert (tmp_path / "data" / name).read_bytes() == body
    assert (tmp_path / "data" / "demo-report.html").stat().st_size > 10_000
    out = capsys.readouterr().out
    assert "== 1. full sync ==" in out and "== 3. normal sync ==" in out
    assert "what changed in the warehouse" in out and "created" in out
    # the push of examples/curated: a preview, an apply, and a second apply that sends nothing
    assert "dry run, nothing sent" in out and "applied again at once: 0 write request(s)" in out
    assert "dana.whitfield@example.net" in out.split("== 5.")[1]
    with duckdb.connect(str(tmp_path / "data" / "demo.duckdb"), read_only=True) as con:
        comments = con.execute("select count(*) from feedback.comments").fetchone()
    # tiny holds 160 comments; the 1% change creates at least one, and the normal sync
    # lands it (deletes wait for --full)
    assert comments is not None and comments[0] > 160
