"""The PostgreSQL destination: a database configured the dlt way
(``DESTINATION__POSTGRES__CREDENTIALS``). The models are built in its schemas ``staging``
and ``marts`` (transpiled from DuckDB's dialect, ``engines.py``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from feedback_sync.extras import require
from feedback_sync.warehouse.sql import SqlTarget

if TYPE_CHECKING:
    from feedback_sync.warehouse.engines import Engine


class Postgres(SqlTarget):
    """A PostgreSQL database, loaded with insert statements."""

    builds_models: ClassVar[bool] = True
    # measured, CSV through COPY was faster (a full sync at `demo` 6.0-7.0 s against
    # 8.3-8.6 s, at `medium` 69-78 s against 83-84 s; 2 rounds each, alternated, one
    # server), but dlt's COPY marks every nullable column FORCE_NULL, so an empty string
    # the API sent lands as NULL (tests/postgres/test_sync_postgres.py). Exact values win:
    # insert statements, dlt's default. dlt then warns, per table, that it turns the Arrow
    # items into statements row by row ("will degrade performance"): that is this
    # decision, and the warning is left to show.
    loader_file_format: ClassVar[str | None] = "insert_values"

    def dlt_destination(self) -> Any:
        """dlt's postgres destination with the credentials resolved here, where a password
        is optional: without one, libpq finds it as ``psql`` would (``PGPASSWORD``, the
        password file) or the server asks for none (``postgres_credentials.py``). Where
        they do not resolve even so, dlt resolves them itself and says what is missing."""
        # without psycopg2, dlt's own error names missing credentials, not the driver
        require("postgres", "the PostgreSQL destination")
        import dlt

        from feedback_sync.warehouse.postgres_credentials import resolve_credentials

        credentials = resolve_credentials(self.pipeline_name)
        if credentials is None:
            return self.destination
        return dlt.destinations.postgres(credentials=credentials)

    def location(self) -> str:
        """The server and database from dlt's configuration (nothing is opened)."""
        server = _postgres_server()
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
        from feedback_sync.warehouse.engines import PostgresEngine

        with self.pipeline().sql_client() as client:
            yield PostgresEngine(client.native_connection), self.describe()

    def prepare_models(self, engine: Engine) -> None:
        from feedback_sync.errors import ModelError
        from feedback_sync.warehouse.engines import has_schema

        if not has_schema(engine, self.dataset):
            raise ModelError(f"{self.describe()} has no dataset {self.dataset!r}: run a sync first")


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
