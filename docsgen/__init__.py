"""The reference pages written from the code: ``python -m docsgen`` (``./run docs``).

Each page of ``docs/reference/`` that says it is generated is written here from what
defines it: the command line's parser (``commands``), the settings' declarations
(``settings``), the source's table registry and the warehouse's own tables (``tables``),
the headers of the SQL models (``models``) and of the push targets (``push_targets``).
``python -m docsgen --check`` writes nothing and fails when a committed page is stale;
``tests/docs/`` runs the same comparison.
"""
