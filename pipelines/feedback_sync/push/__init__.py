"""The reverse sync: curated warehouse rows pushed back through the Feedback API.

Data flow (``feedback-sync push``)::

    curated.<table>  (warehouse schema, or data/curated/<table>.csv|.parquet)
        -> sql/push/<target>.sql   the desired state, one model per target, with a key
        -> plan.py                 validate, diff with the service (warehouse copy, re-read
                                   from the API for rows about to change) and the journal
        -> run.py                  preview (dry run), or apply: parents first
        -> send.py                 each write journaled as intended before it is sent,
                                   then its outcome
        -> push._push_runs, push._push_rows, push._push_snapshot   (the journal)

Modules: ``settings`` (the ``[push]`` section), ``curated`` (the curated inputs),
``targets`` (the ``sql/push`` models), ``values`` (exact values and field comparison),
``kinds`` (one class per API resource: payloads, reads, lookups, and what only that
resource needs), ``journal``, ``plan``, ``send`` (a plan's writes and their outcomes),
``run`` (the targets in turn, and the summaries).
"""
