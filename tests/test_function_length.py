"""Product functions stay under 60 lines (STYLE.md): a reader follows each one on a screen.

A function that reads better whole says why in a comment, and is listed here with that reason. The product
packages are those the import contract lists (pyproject.toml ``[tool.importlinter] root_packages``), so a new
app is measured as soon as it joins the contract.
"""

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MOST_LINES = 60

# "path::qualified name": why it may be longer.
ALLOWED: dict[str, str] = {}


def product_files() -> list[Path]:
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    files = [path for package in contract["root_packages"] for path in (ROOT / package).rglob("*.py")]
    return sorted(path for path in files if "migrations" not in path.relative_to(ROOT).parts)


def function_lengths(path: Path) -> dict[str, int]:
    """Each function's lines, from ``def`` to its last line (docstring included), by qualified name."""
    lengths = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                lengths[name] = (child.end_lineno or child.lineno) - child.lineno + 1
                walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(ast.parse(path.read_text(), filename=str(path)), "")
    return lengths


def long_functions() -> dict[str, int]:
    return {
        f"{path.relative_to(ROOT)}::{name}": lines
        for path in product_files()
        for name, lines in function_lengths(path).items()
        if lines > MOST_LINES
    }


def test_no_product_function_is_over_60_lines_unless_listed_with_a_reason():
    too_long = {name: lines for name, lines in long_functions().items() if name not in ALLOWED}
    assert too_long == {}, f"split these into named steps, or list them in ALLOWED with why: {too_long}"


def test_every_listed_function_is_still_long():
    # A listed function that was split leaves the list, so the list never excuses a new one of the same name.
    assert sorted(set(ALLOWED) - set(long_functions())) == []


def test_the_measure_counts_a_long_function_and_its_methods():
    source = ROOT / "stats" / "dashboard" / "views.py"
    lengths = function_lengths(source)
    assert 20 < lengths["dashboard"] <= MOST_LINES
    assert "_network_csv.lines" in lengths  # nested functions are measured too
    assert any(path.name == "simulate.py" and "devtools" in path.parts for path in product_files())
