"""The wheel of this checkout, built as a release would be (uv, from the source tree)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UV = ROOT / ".tools" / "bin" / "uv"


def build_wheel(out: Path) -> Path:
    """Builds the wheel into ``out``; its path."""
    subprocess.run(
        [str(UV), "build", "--wheel", "--quiet", "--out-dir", str(out), str(ROOT)],
        check=True,
        timeout=300,
    )
    (wheel,) = out.glob("feedback_sync-*.whl")
    return wheel
