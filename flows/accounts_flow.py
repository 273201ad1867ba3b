"""Prefect's entrypoint for the flow ``feedback-sync-accounts`` (``prefect.yaml``): one run
of the sync deployment per account.

The flow is ``feedback_sync.flows.fanout.feedback_sync_accounts`` in the package; this file
only names it for ``prefect deploy``, which loads entrypoints by file path.
"""

from feedback_sync.flows.fanout import feedback_sync_accounts

__all__ = ["feedback_sync_accounts"]
