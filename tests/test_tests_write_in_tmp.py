"""No test writes to an absolute path outside the repository (/work/notes/... screenshots): on a
clean CI machine that folder does not exist, so QImage.save returned False and nothing was
written, or the test made the folder outside the repository. Screenshots go under ``tmp_path``.
A docstring or comment that names such a folder as history is fine: only string values that
code uses are checked."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _bare_strings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are statements of their own (docstrings)."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}


def absolute_work_paths(source: str) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    skip = _bare_strings(tree)
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
                  and node.value.startswith("/work/"))


def test_the_check_sees_a_path_in_code_and_not_in_a_docstring():
    src = '"""Shots were in /work/notes/s13/."""\ndef f(w):\n    """see /work/notes"""\n' \
          '    w.grab().save(f"/work/notes/s14/{1}.png")\n    SHOTS = "/work/notes/x"\n'
    assert [line for line, _ in absolute_work_paths(src)] == [4, 5]


def test_no_test_uses_an_absolute_work_path():
    found = [f"{path.relative_to(TESTS.parent)}:{line}: {value!r}"
             for path in sorted(TESTS.rglob("*.py")) if path != Path(__file__).resolve()
             for line, value in absolute_work_paths(path.read_text(encoding="utf-8"))]
    assert not found, "tests write outside the repository (use tmp_path):\n" + "\n".join(found)
