"""Names for what a run reads and writes: asset keys, the warehouse's concurrency limit, and
artifact keys, all derived from the target. The limit goes by the file's or folder's name
(two warehouses named alike share one limit: they take turns, which is safe); asset and
artifact keys carry the full path or a hash of it, so they never mix two warehouses.

Lineage runs API resource -> loaded table -> mart:

- an API resource is ``<base URL>/<resource>`` (user and password left out);
- a DuckDB table is ``duckdb://<absolute file>/<dataset>/<table>``, a Parquet table
  ``file://<absolute folder>/<table>.parquet``, a PostgreSQL table
  ``postgres://<host>:<port>/<database>/<dataset>/<table>``, a Delta table its own
  location (``s3://<bucket>/<prefix>/<dataset>/<table>``, or ``file://...`` for a folder),
  another destination's ``<destination>://<dataset>/<table>``; no user name or secret is
  ever part of a key (``Target.location``);
- a mart lives beside the tables (``.../marts/<mart>``), except on Delta, where the marts
  are tables of the local models file (``duckdb://<delta dir>/models.duckdb/marts/<mart>``);
  it depends on the loaded tables its staging models read.
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import urlsplit, urlunsplit

from feedback_sync.models.project import MARTS_SCHEMA, Project
from feedback_sync.warehouse.target import Target

# characters Prefect refuses in an asset key; each becomes "-"
_RESTRICTED = re.compile(r"[\s#?&%\"'<>\[\]{}|\\^`]")
_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def _key(text: str) -> str:
    return _RESTRICTED.sub("-", text)


def slug(text: str) -> str:
    return _NOT_SLUG.sub("-", text.lower()).strip("-")


def resource_asset(base_url: str, resource: str) -> str:
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return _key(urlunsplit((parts.scheme, netloc, f"{parts.path.rstrip('/')}/{resource}", "", "")))


def table_asset(target: Target, table: str) -> str:
    return _relation_asset(target, target.dataset, table, mart=False)


def mart_asset(target: Target, mart: str) -> str:
    return _relation_asset(target, MARTS_SCHEMA, mart, mart=True)


def _relation_asset(target: Target, schema: str, name: str, *, mart: bool) -> str:
    uri = target.relation_uri(schema, name, mart=mart)
    if uri is None:  # a destination with no known location
        uri = f"{slug(target.destination) or 'warehouse'}://{schema}/{name}"
    return _key(uri)


def mart_sources(project: Project) -> dict[str, set[str]]:
    """``{mart: {loaded table}}``: the tables each mart reads, through its staging models."""
    by_name = {m.name: m for m in project.models}
    reads: dict[str, set[str]] = {}
    for model in project.models:  # build order: a model's refs come before it
        tables = set(model.sources)
        for ref in model.refs:
            tables |= reads.get(ref, set())
        reads[model.name] = tables
    return {name: reads[name] for name, m in by_name.items() if m.layer == MARTS_SCHEMA}


def root_resource(table: str) -> str:
    """The API resource a loaded table comes from (``followers__companies`` -> followers)."""
    return table.split("__", 1)[0]


def warehouse_name(target: Target) -> str:
    """The warehouse as one slug: what one writer at a time may hold.

    A DuckDB file admits one writing process, whatever the dataset; the Parquet target
    writes through one working file per folder; another destination is one per dataset.
    """
    kind, name, blank = target.writer_name()
    return f"{slug(kind)}-{slug(name) or blank}"


def concurrency_limit(target: Target) -> str:
    """The global concurrency limit every writing flow run holds (create it with limit 1)."""
    return f"feedback-sync-{warehouse_name(target)}"


def artifact_key(target: Target, kind: str) -> str:
    """``feedback-sync-<warehouse>-<dataset>-<hash>-<kind>``: one history per warehouse
    dataset. The hash (of the resolved file or folder, the destination and the dataset)
    keeps two warehouses whose names read alike (``/a/warehouse.duckdb`` and
    ``/b/warehouse.duckdb``) from sharing a history, and so a row-count baseline."""
    path = target.identity_path()
    # a file or folder by its path (as since the first release: a key that changed would
    # start a new history), a server or bucket by its location
    where = str(path.resolve()) if path is not None else target.location()
    identity = "|".join([target.destination, where, target.dataset])
    digest = hashlib.sha256(identity.encode()).hexdigest()[:8]
    return f"feedback-sync-{warehouse_name(target)}-{slug(target.dataset)}-{digest}-{kind}"
