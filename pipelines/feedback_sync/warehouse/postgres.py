"""The PostgreSQL destination: a database configured the dlt way
(``DESTINATION__POSTGRES__CREDENTIALS``). The models are built in its schemas ``staging``
and ``marts`` (transpiled from DuckDB's dialect, ``engines/postgres.py``)."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from feedback_sync.extras import require
from feedback_sync.warehouse.base import connected
from feedback_sync.warehouse.history_sql import HistorySql
from feedback_sync.warehouse.sql import SqlTarget

log = logging.getLogger("feedback_sync")

if TYPE_CHECKING:
    from feedback_sync.warehouse.engines import Engine


# libpq's words when the server wants a password and libpq found none (not in the connection
# string, not in PGPASSWORD, not in the password file), and when it was the wrong one
NO_PASSWORD = "no password supplied"
WRONG_PASSWORD = "password authentication failed"
# the modules its extra (``pip install 'feedback-sync[postgres]'``) brings, that it imports
DRIVER_MODULES = ("psycopg2", "adbc_driver_postgresql")


class PostgresHistorySql(HistorySql):
    """The history step's SQL on PostgreSQL. Its current state is compared as a query, not
    staged: its planner keeps statistics for the tables it joins, none for a new temporary
    one, and a temporary table would ask for the TEMPORARY privilege the target does not
    otherwise need."""

    text_type = "text"
    # json, as dlt's JSON columns there (jsonb is what the PostgreSQL target reads as a
    # table an earlier version made, and COPY cannot write)
    json_type = "json"
    timestamp_type = "timestamp with time zone"
    boolean_type = "boolean"

    def differs(self, name: str, kind: str) -> str:
        """json has no equality: it is compared as jsonb, so keys in another order are the
        same value."""
        if not self.is_json(kind):
            return super().differs(name, kind)
        column = self.col(name)
        return f"h.{column}::jsonb is distinct from c.{column}::jsonb"

    def json_list(self, value: str, order: str) -> str:
        return f"json_agg({value} order by {order})"


class Postgres(SqlTarget):
    """A PostgreSQL database, loaded through ``COPY`` (binary) by the ADBC driver."""

    builds_models: ClassVar[bool] = True
    history_sql: ClassVar[type[HistorySql] | None] = PostgresHistorySql
    # Parquet files, copied in by dlt's ADBC job: binary COPY keeps every value as sent (an
    # empty string stays one, NULL stays NULL: tests/postgres/test_sync_postgres.py), and
    # loads several times faster than insert statements (bench/RESULTS-warehouses.md).
    # dlt's CSV COPY was rejected: it marks every nullable column FORCE_NULL, so an empty
    # string lands as NULL. A JSON column is PostgreSQL's json (its text as written), not
    # jsonb: ADBC cannot copy into jsonb (dlt's type mapper says so).
    loader_file_format: ClassVar[str | None] = "parquet"

    @classmethod
    def failed_to_connect(cls, error: BaseException) -> bool:
        """dlt's connection error, or psycopg2's ``OperationalError`` (a refused or lost
        connection; named, not imported: the extra may not be installed)."""
        kind = type(error)
        if kind.__name__ == "OperationalError" and kind.__module__.startswith("psycopg2"):
            return True
        return super().failed_to_connect(error)

    @classmethod
    def connection_refused(cls, first_line: str) -> tuple[str, int] | None:
        """libpq's words for a login the server refused: configuration, exit 2."""
        if NO_PASSWORD in first_line:
            return (
                f"the destination's server wants a password and none was given ({first_line}): "
                "put it in the connection string (DESTINATION__POSTGRES__CREDENTIALS="
                "postgresql://USER:PASSWORD@HOST:PORT/DATABASE), or in PGPASSWORD, or as "
                "a line HOST:PORT:DATABASE:USER:PASSWORD in ~/.pgpass (chmod 600; "
                "PGPASSFILE names another file)",
                2,
            )
        if WRONG_PASSWORD in first_line:
            return (
                f"the destination refused the login: {first_line} (check the user and the "
                "password: libpq takes the connection string's, else PGPASSWORD, else "
                "the one in ~/.pgpass)",
                2,
            )
        return super().connection_refused(first_line)

    def loader_format(self, pipeline: Any) -> str | None:
        """Parquet through COPY, except into a warehouse an earlier version made: its JSON
        columns are jsonb, which COPY cannot write, so that run loads with insert
        statements (and says how to convert them; CHANGELOG's upgrade notes)."""
        legacy = _jsonb_columns(pipeline)
        if not legacy:
            return self.loader_file_format
        shown = ", ".join(legacy[:3]) + (f" and {len(legacy) - 3} more" if len(legacy) > 3 else "")
        log.warning(
            "%s: %d JSON column(s) are jsonb, as an earlier feedback-sync made them (%s); "
            "COPY cannot write jsonb, so this run loads with insert statements (slower). "
            "To load through COPY, convert them to json: CHANGELOG.md, upgrade notes",
            self.describe(),
            len(legacy),
            shown,
        )
        return "insert_values"

    def dlt_destination(self) -> Any:
        """dlt's postgres destination with the credentials resolved here, where a password
        is optional: without one, libpq finds it as ``psql`` would (``PGPASSWORD``, the
        password file) or the server asks for none (``postgres_credentials.py``). Where
        they do not resolve even so, dlt resolves them itself and says what is missing."""
        # without psycopg2, dlt's own error names missing credentials, not the driver
        require("postgres", "the PostgreSQL destination", DRIVER_MODULES)
        import dlt

        from feedback_sync.warehouse.postgres_credentials import resolve_credentials

        credentials = resolve_credentials(self.pipeline_name)
        if credentials is None:
            return self.destination
        return dlt.destinations.postgres(credentials=credentials)

    def location(self) -> str:
        """The server and database from dlt's configuration (nothing is opened): a
        connection string, or the credentials field by field as dlt resolves them."""
        server = _postgres_server()
        if server is None:
            from feedback_sync.warehouse.postgres_credentials import resolve_credentials

            credentials = resolve_credentials(self.pipeline_name)
            if credentials is not None and credentials.host:
                port = f":{credentials.port}" if credentials.port else ""
                server = f"{credentials.host}{port}/{credentials.database or ''}"
        return f"postgres://{server}" if server else "postgres://"

    def privileges(self, client: Any) -> str:
        """Whether this login may create what a sync and the models make: the dataset's
        schema (or tables in it, where it exists) and the ``staging`` and ``marts``
        schemas (the right to create schemas in the database)."""
        from feedback_sync.errors import WarehouseUnwritable

        ((schemas, exists, tables),) = client.execute_sql(
            "select has_database_privilege(current_database(), 'CREATE'), "
            "exists (select 1 from pg_namespace where nspname = %s), "
            "coalesce((select has_schema_privilege(%s, 'CREATE') "
            "where exists (select 1 from pg_namespace where nspname = %s)), false)",
            self.dataset,
            self.dataset,
            self.dataset,
        )
        if not schemas:
            raise WarehouseUnwritable(
                f"{self.location()}: the login may not create schemas in this database "
                "(the dataset's, staging, marts): GRANT CREATE ON DATABASE ... TO it"
            )
        if exists and not tables:
            raise WarehouseUnwritable(
                f"{self.location()}: the login may not create tables in schema "
                f"{self.dataset}: GRANT CREATE ON SCHEMA {self.dataset} TO it"
            )
        return "the login may create schemas and tables"

    @contextlib.contextmanager
    def open_models(
        self, *, read_only: bool = False, building: bool = False
    ) -> Iterator[tuple[Engine, str]]:
        from feedback_sync.warehouse.engines.postgres import PostgresEngine

        with self.pipeline().sql_client() as client:
            yield PostgresEngine(client.native_connection), self.describe()

    def prepare_models(self, engine: Engine) -> None:
        from feedback_sync.errors import NothingSynced
        from feedback_sync.warehouse.engines import has_schema

        if not has_schema(engine, self.dataset):
            raise NothingSynced(
                f"{self.describe()} has no dataset {self.dataset!r}: run a sync first"
            )


def _jsonb_columns(pipeline: Any) -> list[str]:
    """``schema.table.column`` of every jsonb column of the dataset and of dlt's staging
    dataset beside it (where merges land first)."""
    with connected(pipeline) as client:
        schemas = [client.dataset_name, client.staging_dataset_name]
        rows = client.execute_sql(
            "select table_schema, table_name, column_name from information_schema.columns "
            "where table_schema = any(%s) and data_type = 'jsonb' "
            "order by table_schema, table_name, column_name",
            schemas,
        )
    return [f"{schema}.{table}.{column}" for schema, table, column in rows or ()]


def _postgres_server() -> str | None:
    """``host:port/database`` of the configured PostgreSQL credentials (no user, no
    password), or None when they are not set or not read as a connection string."""
    import dlt
    from dlt.destinations.impl.postgres.configuration import PostgresCredentials

    value: Any = os.environ.get("DESTINATION__POSTGRES__CREDENTIALS") or dlt.secrets.get(
        "destination.postgres.credentials"
    )
    credentials = PostgresCredentials()
    try:
        if isinstance(value, str):
            credentials.parse_native_representation(value)
        elif isinstance(value, Mapping):
            credentials.update(value)
        else:
            return None
    except ValueError:  # not a connection string (dlt says so when it connects)
        return None
    if not credentials.host:
        return None
    port = f":{credentials.port}" if credentials.port else ""
    return f"{credentials.host}{port}/{credentials.database or ''}"


DESTINATION = Postgres
