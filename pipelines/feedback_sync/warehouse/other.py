"""Any other dlt destination, by its dlt name (``--destination bigquery``), configured the
dlt way. It loads, replaces child rows and removes deletes through dlt's SQL client; the
models, the dashboard and the push do not run there."""

from __future__ import annotations

import difflib

from feedback_sync.errors import ConfigError
from feedback_sync.warehouse.sql import SqlTarget

# dlt 1.31's destinations that are not SQL databases: the child-row replacement and the
# deletes this target runs through dlt's SQL client cannot run there
NOT_SQL = {
    "filesystem": "use --destination parquet or delta for files",
    "dummy": "it keeps nothing",
    "destination": "a custom sink function keeps no tables to reconcile",
    "qdrant": "a vector store",
    "lancedb": "a vector store",
    "lance": "a vector store",
    "weaviate": "a vector store",
}


class OtherDestination(SqlTarget):
    """A dlt destination this product has no module of its own for."""

    def __post_init__(self) -> None:
        check_name(self.destination)


def check_name(name: str) -> None:
    """Raises ConfigError for a name that is no SQL destination of dlt's: the valid names,
    and the closest one. A dotted name is a destination's module path, which dlt resolves."""
    if "." in name:
        return
    import dlt.destinations

    from feedback_sync.warehouse.target import DESTINATIONS

    if name in NOT_SQL:
        raise ConfigError(
            f"--destination {name}: dlt's {name} destination is not a SQL database, which "
            f"feedback-sync needs to replace child rows and remove deletes ({NOT_SQL[name]})"
        )
    known = set(dlt.destinations.__all__)
    if name in known:
        return
    names = list(DESTINATIONS) + sorted(known - set(DESTINATIONS) - set(NOT_SQL))
    closest = difflib.get_close_matches(name, names, n=1)
    hint = f" (did you mean {closest[0]}?)" if closest else ""
    raise ConfigError(
        f"--destination {name!r} is not a destination feedback-sync knows{hint}; the names "
        f"are {', '.join(names)}, or a dlt destination's module path"
    )


DESTINATION = OtherDestination
