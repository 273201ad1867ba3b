"""PostgreSQL credentials whose password may be left out, as ``psql`` allows.

dlt's ``PostgresCredentials`` requires a password, so a connection string without one
(``postgresql://loader@db.internal/warehouse``) fails dlt's configuration as "missing
credentials". The server may not want one (trust or peer authentication), or libpq finds it
itself: in ``PGPASSWORD``, else in the password file (``PGPASSFILE``, default
``~/.pgpass``). ``resolve_credentials`` reads the same settings dlt reads, with this one
field optional, and ``postgres.py`` hands dlt the result; dlt's connection string then has
no password part at all (neither ``None`` nor an empty one), so libpq looks for it as
``psql`` would.
"""

from __future__ import annotations

from dlt.common.configuration import configspec, inject_section, resolve_configuration
from dlt.common.configuration.exceptions import ConfigurationException
from dlt.common.configuration.specs.config_section_context import ConfigSectionContext
from dlt.common.typing import TSecretStrValue
from dlt.destinations.impl.postgres.configuration import PostgresCredentials


@configspec(init=False)
class OptionalPasswordCredentials(PostgresCredentials):
    """dlt's PostgreSQL credentials, the password optional (libpq's rules supply it)."""

    # optional again, as dlt's base ConnectionStringCredentials has it
    password: TSecretStrValue | None = None  # type: ignore[assignment]

    def on_resolved(self) -> None:
        super().on_resolved()
        # an empty password (`user:@host`) is no password: libpq skips an empty one in a
        # URI anyway, and the string dlt hands it then has no `:@` to puzzle a reader
        if not self.password:
            self.password = None


def resolve_credentials(pipeline_name: str) -> OptionalPasswordCredentials | None:
    """The credentials dlt would resolve for pipeline ``pipeline_name``'s ``postgres``
    destination (environment, ``secrets.toml``, ``config.toml``; as a connection string or
    field by field, a password not required), or None where they do not resolve: then dlt's
    own resolution fails and says what is missing."""
    context = ConfigSectionContext(pipeline_name=pipeline_name, sections=())
    try:
        with inject_section(context):
            return resolve_configuration(
                OptionalPasswordCredentials(), sections=("destination", "postgres")
            )
    except ConfigurationException:
        return None
