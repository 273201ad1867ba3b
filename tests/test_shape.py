"""The package's functions stay small enough to read: none longer than 80 lines, none with
more than 7 parameters, and no call passing more than 6 values by position (a wrong order
would be silent). Read with ``ast`` from the source, so the rule holds for every module,
the sandbox's included.

Exempt, by what they are: a Prefect flow's parameters (they are its deployments'), and the
sandbox's OpenAPI document (data written as code).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pipelines" / "feedback_sync"

MAX_LINES = 80
MAX_PARAMETERS = 7
MAX_POSITIONAL = 6

# data rather than code: the OpenAPI document the sandbox serves
DATA = {"sandbox/openapi.py:_paths"}


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = node.args
    names = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    count = len(names) + (args.vararg is not None) + (args.kwarg is not None)
    if names and names[0].arg in ("self", "cls"):
        count -= 1
    return count


def _is_flow(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in node.decorator_list:
        called = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(called, ast.Name) and called.id == "flow":
            return True
        if isinstance(called, ast.Attribute) and called.attr == "flow":
            return True
    return False


class _Shape(ast.NodeVisitor):
    """Collects ``rule -> {"module:function"}`` for every function and call that breaks a
    rule (a call by the function it is in, or ``<module>``)."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.where = ["<module>"]
        self.found: dict[str, set[str]] = {"lines": set(), "parameters": set(), "positional": set()}

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        name = f"{self.module}:{node.name}"
        if name not in DATA:
            assert node.end_lineno is not None
            if node.end_lineno - node.lineno + 1 > MAX_LINES:
                self.found["lines"].add(name)
            if _parameters(node) > MAX_PARAMETERS and not _is_flow(node):
                self.found["parameters"].add(name)
        self.where.append(node.name)
        self.generic_visit(node)
        self.where.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_Call(self, node: ast.Call) -> None:
        if len(node.args) > MAX_POSITIONAL:
            self.found["positional"].add(f"{self.module}:{self.where[-1]}")
        self.generic_visit(node)


def _found() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {"lines": set(), "parameters": set(), "positional": set()}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        shape = _Shape(module)
        shape.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        for rule, names in shape.found.items():
            found[rule] |= names
    return found


def test_functions_are_short_take_few_parameters_and_name_what_they_pass() -> None:
    for rule, names in _found().items():
        assert not names, f"{rule} over the limit (MAX_* above): {sorted(names)}"


def test_the_checker_sees_what_it_must() -> None:
    """The checker itself: a long function, a wide one and a wide call are each found."""
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    code = (
        f"def long():\n{body}\n"
        "def wide(a, b, c, d, e, f, g, h): pass\n"
        "def method(self, a, b, c, d, e, f, g): pass\n"
        "wide(1, 2, 3, 4, 5, 6, 7)\n"
        "wide(1, 2, 3, 4, 5, 6, g=7, h=8)\n"
    )
    shape = _Shape("toy.py")
    shape.visit(ast.parse(code))
    assert shape.found == {
        "lines": {"toy.py:long"},
        "parameters": {"toy.py:wide"},
        "positional": {"toy.py:<module>"},
    }
