"""The design's layering rules, enforced.

- core/ never imports Qt, nor gui/ (the dependency points one way).
- gui/ never imports torch or transformers at module level (the window opens
  before a model loads).
- Only core/backends/ imports transformers.
"""

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
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
