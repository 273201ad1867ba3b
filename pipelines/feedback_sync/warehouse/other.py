"""Any other dlt destination, by its dlt name (``--destination bigquery``), configured the
dlt way. It loads, replaces child rows and removes deletes through dlt's SQL client; the
models, the dashboard and the push do not run there."""

from __future__ import annotations

from feedback_sync.warehouse.sql import SqlTarget


class OtherDestination(SqlTarget):
    """A dlt destination this product has no module of its own for."""


DESTINATION = OtherDestination
