"""The folders that ship inside the package: the SQL project (``sql``) and the examples.

In the repository they live at its root, and ``sql`` and
``.../examples`` are links to them; the wheel holds the folders themselves. Either way the
code finds them through ``importlib.resources``, the same way.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def package_path(*parts: str) -> Path:
    """The shipped folder or file ``parts`` (say ``"sql", "push"``), as a real path.

    The package is installed as files (a wheel unpacked, or an editable install), never run
    from a zip, so ``importlib.resources`` hands back a path on disk.
    """
    return Path(str(files("feedback_sync").joinpath(*parts))).resolve()
