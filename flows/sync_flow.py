"""Prefect's entrypoint for the flow ``feedback-sync`` (``prefect.yaml``).

The flow is ``feedback_sync.flows.sync.feedback_sync`` in the package; this file only names
it for ``prefect deploy``, which loads entrypoints by file path.
"""

from feedback_sync.flows.sync import feedback_sync

__all__ = ["feedback_sync"]
