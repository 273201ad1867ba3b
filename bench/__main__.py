"""``./run bench COMMAND``: the benchmarks (not tests; they assert nothing about time)."""

from __future__ import annotations

import sys

from bench import accounts, compare, sandbox_throughput, sync_bench, warehouses

COMMANDS = {
    "sync": sync_bench.main,
    "sandbox": sandbox_throughput.main,
    "warehouses": warehouses.main,
    "compare": compare.main,
    "accounts": accounts.main,
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: ./run bench {{{','.join(COMMANDS)}}} [ARGS]", file=sys.stderr)
        return 2
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
