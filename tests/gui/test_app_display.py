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
        [sys.executable, "-m", "core.cli"], capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 1
    lines = [l for l in out.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "no display found" in lines[0], out.stderr
