"""Prefect flows: the scheduled way to run feedback-sync (``prefect.yaml`` deploys them
by the entrypoints in the repository's ``flows/``).

- ``sync.py``: the flow ``feedback-sync`` (sync, models, data checks, assets, artifacts)
  under one writer slot per warehouse;
- ``push.py``: the flow ``feedback-push`` (the reverse sync, preview or apply);
- ``lineage.py``: asset keys, the warehouse's concurrency limit, artifact keys;
- ``artifacts.py``: the run's keyed table and markdown artifacts;
- ``secrets.py``: the API key from a Prefect ``Secret`` block, else the environment;
- ``logs.py``: the sync's progress, summary and dlt's warnings in the run's logs;
- ``alarm.py`` and ``freshness.yaml``: the automation that fires when no run completed.
"""

from feedback_sync.extras import require

require("prefect", "feedback_sync.flows (the Prefect flows)")
