"""``python -m docsgen``: writes the generated reference pages, and the declared tables of
``init``'s templates (``templates``); ``./run docs`` calls it.

    python -m docsgen            write every page that changed
    python -m docsgen --check    write nothing; exit 1 naming each stale page

A page (or template) is stale when the committed file differs from what the code makes of
it now.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from docsgen import templates
from docsgen.pages import PAGES, ROOT, stale, write


def main(argv: Sequence[str] | None = None) -> int:
    """Writes the pages, or with ``--check`` lists the stale ones; the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m docsgen", description="Write the reference pages generated from the code."
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when a committed page differs from what the code makes",
    )
    args = parser.parse_args(argv)
    if args.check:
        old = [page.path for page in stale(ROOT)]
        old += [template.path for template in templates.stale(ROOT)]
        for path in old:
            print(f"{path} is stale: ./run docs rewrites it", file=sys.stderr)
        return 1 if old else 0
    written = [page.path for page in write(ROOT)]
    written += [template.path for template in templates.write(ROOT)]
    for path in written:
        print(f"docsgen: wrote {path}")
    if not written:
        print(f"docsgen: {len(PAGES)} pages up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
