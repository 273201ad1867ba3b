"""The tutorials, run as written: every command block in order in one shell (the install
aside; the reference server on a free port, in the background, as the second terminal
would have it), and every output block and figure their text states held to what the
commands printed.

An output block's line must be a line the command before it printed, where ``...`` stands
for anything, and a duration, a run id or the server's port for any other of its kind. A
line of ``...`` alone (an elided row) is skipped.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.script import free_port, run_script

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = ("first-sync.md", "first-push.md")  # in order: the second continues the first
PORT = "8765"
MARK = "@@tutorial-block@@"


@dataclass
class Block:
    page: str
    kind: str  # bash or text
    body: str


def _blocks() -> list[Block]:
    found = []
    for page in TUTORIALS:
        text = (ROOT / "docs" / "tutorials" / page).read_text(encoding="utf-8")
        for kind, body in re.findall(r"```(bash|text)\n(.*?)```", text, re.S):
            found.append(Block(page, kind, body))
    return found


def _script(blocks: list[Block], port: int) -> str:
    """One bash script of every command block, a mark printed before each."""
    lines = ["trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT"]
    for number, block in enumerate(b for b in blocks if b.kind == "bash"):
        body = block.body.replace(PORT, str(port))
        commands = [c for c in body.strip().splitlines() if not c.startswith("pip install")]
        lines.append(f"echo '{MARK} {number}'")
        for command in commands:
            if command.startswith("feedback-sync sandbox"):
                # the first terminal: in the background, ready before the next block
                lines.append(f"{command.replace('sandbox ', f'sandbox --port {port} ', 1)} &")
                lines.append(
                    f"for i in $(seq 100); do curl -sf http://127.0.0.1:{port}/_sandbox/health "
                    ">/dev/null && break; sleep 0.2; done"
                )
            else:
                lines.append(command)
    return "\n".join(lines) + "\n"


def _pattern(line: str, port: int) -> re.Pattern[str] | None:
    """What an output block's line must match in the output (its spaces collapsed), or
    None to skip it."""
    line = " ".join(line.replace(PORT, str(port)).split())
    if re.fullmatch(r"[ .│|]*", line):
        return None  # an empty line, or an elided row
    regex = ""
    for piece in re.split(r"(\.\.\.|\b\d+\.\d+s\b|\d{8}T\d{6}-[0-9a-f]{8})", line):
        if piece == "...":
            regex += ".*"
        elif re.fullmatch(r"\d+\.\d+s", piece):
            regex += r"\d+\.\d+s"
        elif re.fullmatch(r"\d{8}T\d{6}-[0-9a-f]{8}", piece):
            regex += r"\d{8}T\d{6}-[0-9a-f]{8}"
        else:
            regex += re.escape(piece)
    return re.compile(regex)


def _numbers(text: str) -> list[int]:
    return [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", text)]


@pytest.mark.slow
def test_the_tutorials_say_what_their_commands_print(tmp_path: Path) -> None:
    blocks = _blocks()
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "PUSH__"))},
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "DLT_DATA_DIR": str(tmp_path / "dlt"),
    }
    code, out, _ = run_script(_script(blocks, port), tmp_path, env, 600, merged=True)
    assert code == 0, out[-3000:]
    printed = {
        int(number): text
        for number, text in re.findall(rf"{MARK} (\d+)\n(.*?)(?={MARK}|\Z)", out, re.S)
    }

    # every output block: the lines the command block before it printed
    command = -1
    said: dict[int, str] = {}
    for block in blocks:
        if block.kind == "bash":
            command += 1
            continue
        said[command] = block.body
        lines = printed[command].splitlines()
        for line in block.body.splitlines():
            pattern = _pattern(line, port)
            if pattern is not None:
                assert any(pattern.fullmatch(" ".join(o.split())) for o in lines), (
                    f"{block.page}: {line.strip()!r} is not what the command printed:\n"
                    + printed[command][-3000:]
                )

    # the figures of the prose
    first_sync = (ROOT / "docs" / "tutorials" / "first-sync.md").read_text(encoding="utf-8")
    syncs = [text for text in printed.values() if "requests (" in text and "sync into" in text]
    requests = [_numbers(s.split(" requests (", 1)[0].rsplit(" ", 1)[-1])[0] for s in syncs]
    stated = re.search(r"([\d,]+) requests instead of ([\d,]+)", first_sync)
    assert stated is not None
    assert (_numbers(stated.group(2))[0], _numbers(stated.group(1))[0]) == tuple(requests[:2])
    seeded = re.search(r"It seeds its data \(([^)]*)\)", first_sync)
    assert seeded is not None
    for count, table in re.findall(r"(\d[\d,]*) ([a-z_]+)", seeded.group(1)):
        row = re.search(rf"^\s+{table}\s+(.*)$", syncs[0], re.M)
        assert row is not None, table
        assert _numbers(row.group(1))[-1] == _numbers(count)[0], (table, row.group(0))
