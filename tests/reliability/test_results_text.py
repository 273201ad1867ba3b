"""reliability/RESULTS.md holds what a run found, not the details that change every run: the
sandbox's port, process ids and start times; and a message's HTML stays text in a table."""

from __future__ import annotations

from reliability.__main__ import _cell, plain


def test_a_runs_port_process_and_time_are_written_as_stand_ins() -> None:
    line = (
        "ideas: GET http://127.0.0.1:37227/v1/ideas?limit=2 failed; warehouse is in use by "
        "another feedback-sync sync (process 18269, since 2026-11-23 20:01:33 UTC); nothing"
    )
    assert plain(line) == (
        "ideas: GET <sandbox>/v1/ideas?limit=2 failed; warehouse is in use by "
        "another feedback-sync sync (process <pid>, since <time>); nothing"
    )
    # an address that is not the sandbox's loopback stays as it was
    assert plain("GET https://api.example.com/v1/ideas") == "GET https://api.example.com/v1/ideas"


def test_a_table_cell_keeps_html_as_text_and_no_column_break() -> None:
    assert _cell("HTTP 502 '<html>a|b</html>'") == "HTTP 502 '&lt;html&gt;a/b&lt;/html&gt;'"
