"""Prefect's entrypoint for the flow ``feedback-push`` (``prefect.yaml``).

The flow is ``feedback_sync.flows.push.feedback_push`` in the package; this file only names
it for ``prefect deploy``, which loads entrypoints by file path.
"""

from feedback_sync.flows.push import feedback_push

__all__ = ["feedback_push"]
