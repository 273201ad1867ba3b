"""The reliability suite: the sync and the push under injected faults, with figures.

``./run reliability`` runs the whole fault matrix (every fault kind at 1%, 10% and 30%,
against a full sync, a normal sync and a push) and writes ``reliability/RESULTS.md``;
``tests/reliability`` runs a seeded slice of it inside ``./run test``. The ground truth is
the sandbox's own store (``/_sandbox/dump``), compared row by row
(``tests/sync/harness.py``), and the writes the server applied (its request log).
"""
