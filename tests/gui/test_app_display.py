"""Without a display the app says what to do instead of letting Qt abort."""

import subprocess
import sys

from gui.app import display_problem


def test_display_problem_rules():
    assert display_problem({}, "linux") is not None
    assert "xvfb-run" in display_problem({}, "linux")
    assert display_problem({"DISPLAY": ":0"}, "linux") is None
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}, "linux") is None
    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None
    assert display_problem({}, "darwin") is None


def test_cli_without_display_is_one_line_error():
    out = subprocess.run(
        [sys.executable, "-m", "gui.app"], capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 1
    lines = [l for l in out.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "no display found" in lines[0], out.stderr


def test_models_load_when_their_tab_is_first_shown(qtbot, tmp_path, monkeypatch):
    from PySide6.QtCore import QSettings

    from gui.main_window import MainWindow

    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    w = MainWindow(settings=settings, autoload=False)
    qtbot.addWidget(w)
    calls = []
    for tab in (w.speech_tab, w.ocr_tab, w.translation_tab):
        monkeypatch.setattr(tab, "load_model", lambda name, t=tab: calls.append((t.title, name)))
    w.tabs.setCurrentWidget(w.speech_tab)
    w.autoload_models()
    assert [c[0] for c in calls] == [w.speech_tab.title]
    w.tabs.setCurrentWidget(w.translation_tab)
    assert [c[0] for c in calls] == [w.speech_tab.title, w.translation_tab.title]
    assert calls[1][1] == w.translation_tab.initial_model()
    w.speech_tab.model = object()  # a tab whose model is loaded is not loaded again
    w.tabs.setCurrentWidget(w.speech_tab)
    assert len(calls) == 2
    w.speech_tab.model = None


def test_headless_commands_never_import_qt():
    """``decoding-explorer --version`` / a command goes to core.cli without loading Qt."""
    code = (
        "import sys\n"
        "from gui.app import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit as e:\n    code = e.code\n"
        "print('PySide6.QtWidgets' in sys.modules, 'PySide6.QtCore' in sys.modules, code)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "False False 0"
    assert out.stdout.startswith("decoding-explorer ")
