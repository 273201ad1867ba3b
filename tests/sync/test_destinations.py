"""Each destination is one module behind ``Target``: the name picks the module, and every
module implements what the interface requires (``Target``'s abstract methods)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from feedback_sync.warehouse.target import DESTINATIONS, OTHER, Target, make_target


@pytest.mark.parametrize("module_name", [*DESTINATIONS.values(), OTHER])
def test_every_destination_implements_the_interface(module_name: str) -> None:
    import inspect

    chosen = importlib.import_module(module_name).DESTINATION
    assert issubclass(chosen, Target)
    required = sorted(Target.__abstractmethods__)
    assert "reconcile" in required and "check_writable" in required
    missing = [name for name in required if getattr(chosen, name) is getattr(Target, name)]
    assert missing == []
    assert not inspect.isabstract(chosen)


def test_the_interface_cannot_be_made_itself() -> None:
    """``Target`` is only an interface: a target is made by ``make_target``."""
    with pytest.raises(TypeError, match="abstract"):
        Target()  # type: ignore[abstract]


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("duckdb", "DuckDb"),
        ("parquet", "Parquet"),
        ("postgres", "Postgres"),
        ("delta", "Delta"),
        ("bigquery", "OtherDestination"),
    ],
)
def test_the_name_picks_the_module(name: str, cls: str) -> None:
    target = make_target(destination=name, dataset="fb")
    assert type(target).__name__ == cls
    assert (target.destination, target.dataset) == (name, "fb")
    assert type(make_target(name)).__name__ == cls  # the name alone


def test_targets_compare_and_replace_as_values(tmp_path: Path) -> None:
    import dataclasses

    one = make_target(destination="parquet", parquet_dir=tmp_path)
    assert one == make_target(destination="parquet", parquet_dir=tmp_path)
    assert hash(one) == hash(make_target(destination="parquet", parquet_dir=tmp_path))
    other = dataclasses.replace(one, dataset="elsewhere")
    assert type(other) is type(one) and other.dataset == "elsewhere"


def test_only_the_chosen_destination_module_is_imported() -> None:
    """Making a DuckDB target imports neither delta-rs's module nor PostgreSQL's."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from feedback_sync.warehouse.target import make_target\n"
        "make_target(destination='duckdb')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('feedback_sync.'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    assert "feedback_sync.warehouse.duckdb" in loaded
    others = {"delta", "delta_tables", "postgres", "parquet", "other"}
    assert not {f"feedback_sync.warehouse.{name}" for name in others} & loaded


@pytest.mark.slow
def test_the_dlt_settings_a_target_makes_are_its_pipelines_own(tmp_path: Path) -> None:
    """A target's pipeline sets dlt's load-id, abort and cleanup settings under its own
    name: another dlt pipeline in the same process keeps dlt's defaults."""
    import subprocess
    import sys

    code = f"""
import json, dlt, pyarrow as pa
from pathlib import Path
from feedback_sync.warehouse.target import make_target
ours = make_target(duckdb_path=Path({str(tmp_path / "w.duckdb")!r}),
              pipelines_dir=Path({str(tmp_path)!r}))
ours.pipeline()
theirs = dlt.pipeline("theirs", destination="duckdb", dataset_name="d",
                      pipelines_dir={str(tmp_path / "theirs")!r})
theirs.run(pa.table({{"id": [1]}}), table_name="t")
with theirs.sql_client() as client:
    columns = [r[0] for r in client.execute_sql(
        "select column_name from information_schema.columns where table_name = 't'")]
print(json.dumps({{
    "unscoped": [dlt.config.get(k) for k in (
        "load.auto_abort_on_terminal_error", "load.delete_completed_jobs",
        "normalize.parquet_normalizer.add_dlt_load_id")],
    "ours": dlt.config.get("feedback_sync.load.auto_abort_on_terminal_error"),
    "their_load_id": "_dlt_load_id" in columns,
}}))
"""
    env = {**__import__("os").environ, "RUNTIME__DLTHUB_TELEMETRY": "false"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"unscoped": [None, None, None], "ours": True, "their_load_id": False}


def test_models_without_parquet_files_make_no_models_file(tmp_path: Path) -> None:
    from feedback_sync.errors import ModelError
    from feedback_sync.models.project import apply

    target = make_target(
        destination="parquet", parquet_dir=tmp_path / "out", pipelines_dir=tmp_path
    )
    with pytest.raises(ModelError, match="no Parquet files in"):
        apply(target)
    assert not target.models_file().exists()


def test_a_refused_connection_is_explained_by_the_destination_that_knows_its_words() -> None:
    """libpq's words are PostgreSQL's module's (configuration, exit 2), asked even in a
    process that made no PostgreSQL target (a task's retry decision); a server's "does not
    exist" is any destination's; anything else is not known (a server down may be back)."""
    import subprocess
    import sys

    from feedback_sync.warehouse.driver_errors import explain_connection

    fresh = (
        "from feedback_sync.warehouse.driver_errors import explain_connection\n"
        "print(explain_connection('fe_sendauth: no password supplied')[1])"
    )
    done = subprocess.run([sys.executable, "-c", fresh], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "2"

    said = explain_connection("fe_sendauth: no password supplied")
    assert said is not None and said[1] == 2 and "~/.pgpass" in said[0]
    said = explain_connection('FATAL:  password authentication failed for user "u"')
    assert said is not None and said[1] == 2 and "PGPASSWORD" in said[0]
    said = explain_connection('FATAL:  database "nope" does not exist')
    assert said == (
        'the destination refused the login: FATAL:  database "nope" does not exist (check '
        "DESTINATION__<NAME>__CREDENTIALS)",
        2,
    )
    assert explain_connection("connection refused: is the server running?") is None
