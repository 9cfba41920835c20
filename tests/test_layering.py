"""The design's layering rules, enforced.

- core/ never imports Qt, nor gui/ (the dependency points one way).
- gui/ never imports torch or transformers at module level (the window opens
  before a model loads).
- Only core/backends/ imports transformers.
- core/backends/ never imports core/tasks/; no two modules of core/ or gui/ import each other
  (directly or round a circle; lazy imports count); no private name of a gui/ file is used in
  another gui/ file; every table of model names agrees with core/catalog.py (issue 20 §5).
  ``test_each_rule_fails_on_a_deliberate_violation`` shows each rule failing.
"""

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = ROOT_OF_THE_REPO = pathlib.Path(__file__).resolve().parents[1]
QT = ("PySide6", "PyQt5", "PyQt6", "qtpy", "superqt", "pyqtgraph")


def _imports(path: pathlib.Path, module_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_core_never_imports_qt():
    offenders = {
        str(p.relative_to(ROOT)): sorted(_imports(p, False) & set(QT)) for p in (ROOT / "core").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_core_never_imports_gui():
    offenders = {
        str(p.relative_to(ROOT)): sorted(_imports(p, False) & {"gui"}) for p in (ROOT / "core").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_gui_does_not_import_torch_at_module_level():
    offenders = {
        str(p.relative_to(ROOT)): sorted(_imports(p, True) & {"torch", "transformers"})
        for p in (ROOT / "gui").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_only_backends_import_transformers():
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "core").rglob("*.py")
        if "backends" not in p.parts and "transformers" in _imports(p, False)
    ]
    assert offenders == []


def test_importing_gui_does_not_load_torch():
    code = (
        "import sys, importlib, pkgutil, gui\n"
        "for m in pkgutil.walk_packages(gui.__path__, 'gui.'):\n"
        "    importlib.import_module(m.name)\n"
        "print('torch' in sys.modules, 'transformers' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False False"


def test_catalog_is_torch_free_and_the_tasks_use_it():
    code = (
        "import sys\n"
        "import core.catalog as c\n"
        "print('torch' in sys.modules, c.WHISPER_DEFAULT in c.WHISPER_BUNDLED)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False True"
    from core import catalog
    from core.tasks import speech

    assert speech.DEFAULT_MODEL is catalog.WHISPER_DEFAULT and speech.SAMPLE_RATE == catalog.SAMPLE_RATE


# ------------------------------------------------------------------ the import graph (issue 20 §5)
# Edges are every import in a file, module level or inside a function: a lazy import still ties
# two modules together. ``from core.x import y`` is an edge to core.x.y when y is a module, else
# to core.x (a package's __init__ counts as a module: a submodule that imports a name from its
# own package's __init__, which imports the submodule, closes a circle).


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, pathlib.Path]:
    return {_module_name(p): p for pkg in ("core", "gui") for p in (ROOT / pkg).rglob("*.py")}


def _edges(name: str, path: pathlib.Path, known) -> set[str]:
    """The project modules ``name`` imports (module level and in functions)."""
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                module = ".".join(base[: len(base) - node.level + 1] + ([module] if module else []))
            targets.update(f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names)
    return {t for t in targets if t in known and t != name}


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports, for every module of core/ and gui/."""
    modules = _modules()
    return {name: _edges(name, path, modules) for name, path in modules.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_backends_never_import_tasks():
    graph = import_graph()
    offenders = sorted((a, b) for a, targets in graph.items() for b in targets
                       if a.startswith("core.backends") and b.startswith("core.tasks"))
    assert offenders == []


def test_no_import_cycles():
    """No two modules of core/ or gui/ import each other, directly or round a longer circle."""
    assert import_cycles(import_graph()) == []


# ------------------------------------------------------------------ private names across gui/ files
# A name with a leading underscore is private to the file that defines it. Defined: a module-level
# def / class / assignment, a method, or an attribute assigned on self. Used across files: another
# gui/ file that does not define the name itself reads or writes it as an attribute, or imports it.

# issue 20: H2 removes these (the run tab's mixins and their clients share self today).
PRIVATE_NAMES_ALLOWED: frozenset[tuple[str, str]] = frozenset({
})


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_private(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            names.add(node.attr)
    return {n for n in names if _private(n)}


def _used_private(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.name for a in node.names)
    return {n for n in names if _private(n)}


def private_names_across_gui_files() -> set[tuple[str, str]]:
    """(private name, the gui/ file that uses it but does not define it) for every private name
    some other gui/ file defines."""
    trees = {str(p.relative_to(ROOT)): ast.parse(p.read_text(encoding="utf-8")) for p in (ROOT / "gui").rglob("*.py")}
    defined = {f: _defined_private(t) for f, t in trees.items()}
    everywhere = set().union(*defined.values())
    return {(name, f) for f, t in trees.items() for name in _used_private(t) - defined[f] if name in everywhere}


def test_no_private_name_is_used_across_gui_files():
    found = private_names_across_gui_files()
    assert sorted(found - PRIVATE_NAMES_ALLOWED) == []


# ------------------------------------------------------------------ one table of model names
def test_model_tables_agree_with_the_catalog():
    """core/catalog.py is THE table of model names; every other table of them is derived from it."""
    from core import catalog
    from core.backends import marian_tiny, whisper_models
    from gui.tabs import translation

    assert tuple(whisper_models._BUNDLED) == catalog.WHISPER_BUNDLED
    assert catalog.WHISPER_DEFAULT in catalog.WHISPER_BUNDLED
    assert tuple(marian_tiny.DIRECTIONS) == catalog.TRANSLATION_BUNDLED
    assert tuple(translation.DIRECTION_LABELS) == catalog.TRANSLATION_BUNDLED
    assert catalog.TRANSLATION_DEFAULT in catalog.TRANSLATION_BUNDLED


# ------------------------------------------------------------------ each rule is seen to fail
def test_each_rule_fails_on_a_deliberate_violation(tmp_path, monkeypatch):
    """A small tree that breaks every rule once: each rule above must fail on it."""
    files = {
        "core/__init__.py": "",
        "core/backends/__init__.py": "",
        "core/backends/x.py": "def f():\n    from core.tasks import t  # backends -> tasks, and a circle\n"
                              "    import gui.w  # core -> gui\n",
        "core/tasks/__init__.py": "",
        "core/tasks/t.py": "from core.backends import x\n",
        "gui/__init__.py": "",
        "gui/w.py": "class W:\n    def _hidden(self):\n        return 1\n",
        "gui/v.py": "def g(w):\n    return w._hidden()  # a private name of gui/w.py\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    for rule in (test_core_never_imports_gui, test_backends_never_import_tasks, test_no_import_cycles,
                 test_no_private_name_is_used_across_gui_files):
        with pytest.raises(AssertionError):
            rule()
    monkeypatch.setitem(globals(), "ROOT", ROOT_OF_THE_REPO)

    from core.backends import marian_tiny

    monkeypatch.setattr(marian_tiny, "DIRECTIONS", {"en-pt": "enpt"})  # a table that forgot a direction
    with pytest.raises(AssertionError):
        test_model_tables_agree_with_the_catalog()
