"""The docstring under each field of a class (the string on the line after ``name: type``),
read from the class's source: the same convention dlt and Sphinx follow."""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap


def field_docs(cls: type) -> dict[str, str]:
    """``{field: its docstring}`` for the annotated fields of ``cls`` that have one."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = next(node for node in tree.body if isinstance(node, ast.ClassDef)).body
    docs: dict[str, str] = {}
    for field, after in itertools.pairwise(body):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[field.target.id] = inspect.cleandoc(after.value.value)
    return docs
