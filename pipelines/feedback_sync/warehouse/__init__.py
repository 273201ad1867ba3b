"""Where a sync lands. ``target.Target`` is the one interface; each destination is a module
of its own behind it:

- ``duckdb``, ``parquet``, ``postgres``, ``delta``, ``other``: the destinations (``sql``
  holds what the SQL ones share);
- ``delta_tables``, ``parquet_files``: the Delta bookkeeping and the Parquet writing they
  use;
- ``appends`` (first loads that append, settled after), ``reconcile`` (stale child rows and
  deletes, in SQL), ``load_order`` (merges after every copy), ``runlock`` (one writer at a
  time), ``engines`` (the SQL the models run on: DuckDB, PostgreSQL), ``base`` (shared SQL).
"""
