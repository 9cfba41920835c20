"""The README's two commands do all the set-up (issue 9, part 1).

- ``.ci/sysdeps.sh`` (``make sysdeps``): installs only what ``dpkg-query`` says is
  missing, as root or through ``sudo -n``, else one line with the command to run. Run
  here with stand-ins for dpkg-query, apt-get, sudo and id on a PATH of their own, so
  nothing is installed.
- The Makefile: ``make run`` installs the window's packages, ``make test`` adds the
  test-only ones, before the venv; ``.ci/run`` uses the same target.
- ``gui.platform_check``: a missing xcb library is one line with the apt command, and
  ``gui.app.main`` exits 1 with it before any QApplication exists.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gui import platform_check
from gui.platform_check import missing_libraries, packages_for, qt_uses_xcb, xcb_problem

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "sysdeps.sh"


# --- .ci/sysdeps.sh with stand-in commands ----------------------------------------------

STUBS = {
    # installed.txt: "name status" lines, like dpkg's database; unknown names go to stderr
    "dpkg-query": r"""#!/bin/sh
echo "dpkg-query $*" >> "$STUB_DIR/calls.log"
rc=0
shift 2  # -W -f=FORMAT
for p in "$@"; do
  line=$(grep "^$p " "$STUB_DIR/installed.txt")
  if [ -n "$line" ]; then echo "$line"; else echo "dpkg-query: no packages found matching $p" >&2; rc=1; fi
done
exit $rc
""",
    "apt-get": r"""#!/bin/sh
echo "apt-get $* [uid=$(id -u) DEBIAN_FRONTEND=${DEBIAN_FRONTEND:-}]" >> "$STUB_DIR/calls.log"
""",
    "sudo": r"""#!/bin/sh
echo "sudo $*" >> "$STUB_DIR/calls.log"
[ "$1" = "-n" ] || exit 2
shift
[ -f "$STUB_DIR/sudo_ok" ] || { echo "sudo: a password is required" >&2; exit 1; }
FAKE_UID=0 exec "$@"
""",
    "id": r"""#!/bin/sh
echo "${FAKE_UID:-1000}"
""",
}


def _sysdeps(tmp_path: Path, args, installed=(), uid=1000, sudo_ok=False, debian=True):
    """Run .ci/sysdeps.sh ARGS with stand-ins; return (completed process, call log lines)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("awk", "grep", "env", "true"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    for name, text in STUBS.items():
        if not debian and name in ("dpkg-query", "apt-get"):
            continue
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "installed.txt").write_text("".join(f"{line}\n" for line in installed))
    (tmp_path / "calls.log").write_text("")
    if sudo_ok:
        (tmp_path / "sudo_ok").write_text("")
    env = {"PATH": str(bin_dir), "STUB_DIR": str(tmp_path), "FAKE_UID": str(uid)}
    out = subprocess.run(["/bin/sh", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=30)
    calls = (tmp_path / "calls.log").read_text().splitlines()
    return out, calls


def _apt_calls(calls):
    return [c for c in calls if c.startswith("apt-get")]


def test_nothing_missing_installs_nothing_and_prints_nothing(tmp_path):
    out, calls = _sysdeps(tmp_path, ["libfoo1", "libbar2"], installed=["libfoo1 installed", "libbar2 installed"])
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and out.stderr == ""
    assert _apt_calls(calls) == [] and not any(c.startswith("sudo") for c in calls)
    assert len([c for c in calls if c.startswith("dpkg-query")]) == 1  # one query for all


def test_t64_rename_counts_as_installed(tmp_path):
    out, calls = _sysdeps(tmp_path, ["libglib2.0-0"], installed=["libglib2.0-0t64 installed"])
    assert out.returncode == 0 and _apt_calls(calls) == [], (out.stderr, calls)


def test_root_updates_once_then_installs_exactly_the_missing(tmp_path):
    out, calls = _sysdeps(
        tmp_path,
        ["libfoo1", "libbar2", "libbaz3"],
        installed=["libfoo1 installed", "libbaz3 config-files"],  # removed, not purged: missing
        uid=0,
    )
    assert out.returncode == 0, out.stderr
    assert _apt_calls(calls) == [
        "apt-get update -q [uid=0 DEBIAN_FRONTEND=]",
        "apt-get install -y -q --no-install-recommends libbar2 libbaz3 [uid=0 DEBIAN_FRONTEND=noninteractive]",
    ]
    assert not any(c.startswith("sudo") for c in calls)


def test_user_with_passwordless_sudo_goes_through_sudo(tmp_path):
    out, calls = _sysdeps(tmp_path, ["libfoo1", "libbar2"], installed=["libfoo1 installed"], sudo_ok=True)
    assert out.returncode == 0, out.stderr
    sudo = [c for c in calls if c.startswith("sudo")]
    assert sudo[0] == "sudo -n true"
    assert sudo[1:] == [
        "sudo -n apt-get update -q",
        "sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libbar2",
    ]
    as_seen_by_apt = [c.split(" [")[1] for c in _apt_calls(calls)]
    assert as_seen_by_apt == ["uid=0 DEBIAN_FRONTEND=]", "uid=0 DEBIAN_FRONTEND=noninteractive]"]


def test_user_without_sudo_stops_with_one_line_and_the_command(tmp_path):
    out, calls = _sysdeps(tmp_path, ["libfoo1", "libbar2", "libbaz3"], installed=["libbar2 installed"])
    assert out.returncode != 0
    assert _apt_calls(calls) == []
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].endswith(
        "install them with: sudo apt-get update && sudo apt-get install -y --no-install-recommends libfoo1 libbaz3"
    )


def test_without_dpkg_it_names_the_packages_and_goes_on(tmp_path):
    out, calls = _sysdeps(tmp_path, ["libfoo1", "libbar2"], debian=False)
    assert out.returncode == 0
    assert calls == []
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and "libfoo1 libbar2" in lines[0], out.stderr


# --- Makefile and .ci/run ------------------------------------------------------------


# a clean make, even when pytest itself runs under `make test`
MAKE_ENV = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "WITH_TESTS")}


def _make_dry(*args: str) -> list[str]:
    out = subprocess.run(
        ["make", "-n", "--no-print-directory", *args],
        cwd=ROOT, env=MAKE_ENV, capture_output=True, text=True, timeout=30, check=True,
    )
    return out.stdout.splitlines()


def _make_var(name: str) -> list[str]:
    out = subprocess.run(
        ["make", "-s", "--no-print-directory", "-C", str(ROOT), "--eval", f"print-var: ; @echo $({name})", "print-var"],
        env=MAKE_ENV, capture_output=True, text=True, timeout=30, check=True,
    )
    return out.stdout.split()


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_make_run_installs_the_window_packages_and_make_test_adds_the_test_ones():
    run_pkgs, test_pkgs = _make_var("RUN_PACKAGES"), _make_var("TEST_PACKAGES")
    assert {"libxcb-cursor0", "libxcb-icccm4", "libxkbcommon-x11-0", "libportaudio2", "libsndfile1"} <= set(run_pkgs)
    assert {"espeak-ng", "pulseaudio", "xvfb"} <= set(test_pkgs) and not set(test_pkgs) & set(run_pkgs)
    for target, expected in (("run", run_pkgs), ("test", run_pkgs + test_pkgs)):
        lines = _make_dry(target)
        first = lines[0].split()
        assert first[:2] == ["sh", ".ci/sysdeps.sh"], lines  # before anything else
        assert first[2:] == expected, target


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_a_fresh_venv_is_built_after_the_packages(tmp_path):
    """python3-venv must be there before `python3 -m venv`, whichever target builds the venv."""
    venv = tmp_path / "venv"
    for target in ("run", f"{venv}/.installed"):
        lines = _make_dry(f"VENV={venv}", target)
        assert lines[0].startswith("sh .ci/sysdeps.sh python3 python3-venv "), (target, lines)
        assert any(" -m venv " in line for line in lines[1:]), (target, lines)


def test_ci_run_uses_the_make_target_not_its_own_list():
    text = (ROOT / ".ci" / "run").read_text()
    assert "make sysdeps WITH_TESTS=1" in text
    assert "apt-get install" not in text and "APT_PACKAGES" not in text


# --- the xcb platform plugin check ----------------------------------------------------

LDD_OK = """\
\tlinux-vdso.so.1 (0x00007ffd)
\tlibQt6XcbQpa.so.6 => /venv/PySide6/Qt/plugins/platforms/../../lib/libQt6XcbQpa.so.6 (0x00007f01)
\tlibxcb-cursor.so.0 => /lib/x86_64-linux-gnu/libxcb-cursor.so.0 (0x00007f02)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f03)
"""

LDD_MISSING = """\
/venv/PySide6/Qt/plugins/platforms/libqxcb.so:
\tlibQt6XcbQpa.so.6 => /venv/PySide6/Qt/lib/libQt6XcbQpa.so.6 (0x00007f01)
\tlibxcb-cursor.so.0 => not found
\tlibxcb-icccm.so.4 => not found
\tlibxkbcommon-x11.so.0 => not found
\tlibxcb-util.so.1 => /lib/x86_64-linux-gnu/libxcb-util.so.1 (0x00007f04)
/venv/PySide6/Qt/lib/libQt6XcbQpa.so.6:
\tlibxcb-cursor.so.0 => not found
\tlibweird.so.9 => not found
"""

XCB_ENV = {"DISPLAY": ":0", "PATH": "/usr/bin:/bin"}


def test_missing_libraries_parses_ldd():
    assert missing_libraries(LDD_OK) == []
    assert missing_libraries(LDD_MISSING) == [
        "libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxkbcommon-x11.so.0", "libweird.so.9",
    ]


def test_packages_for_maps_sonames_and_keeps_unknown_ones():
    assert packages_for(["libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxkbcommon-x11.so.0", "libweird.so.9"]) == [
        "libxcb-cursor0", "libxcb-icccm4", "libxkbcommon-x11-0", "libweird.so.9",
    ]
    assert packages_for(["libglib-2.0.so.0", "libgthread-2.0.so.0"]) == ["libglib2.0-0"]


def test_qt_uses_xcb_rules():
    assert qt_uses_xcb({"DISPLAY": ":0"}, "linux")
    assert qt_uses_xcb({"QT_QPA_PLATFORM": "xcb", "WAYLAND_DISPLAY": "w-0", "DISPLAY": ":0"}, "linux")
    assert qt_uses_xcb({"QT_QPA_PLATFORM": "xcb:nograb"}, "linux")
    assert not qt_uses_xcb({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}, "linux")
    assert not qt_uses_xcb({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}, "linux")
    assert not qt_uses_xcb({}, "linux")
    assert not qt_uses_xcb({"DISPLAY": ":0"}, "darwin")


def _fake_ldd(stdout: str, seen: list | None = None):
    def run(cmd, **kwargs):
        if seen is not None:
            seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 1 if "not found" in stdout else 0, stdout, "")

    return run


@pytest.fixture
def plugin(tmp_path) -> Path:
    """A stand-in PySide6 tree: Qt/plugins/platforms/libqxcb.so and Qt/lib/libQt6XcbQpa.so.6."""
    path = tmp_path / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    (tmp_path / "Qt" / "lib").mkdir()
    (tmp_path / "Qt" / "lib" / "libQt6XcbQpa.so.6").write_bytes(b"")
    return path


def test_xcb_problem_names_the_libraries_and_the_apt_command(plugin):
    seen: list = []
    msg = xcb_problem(XCB_ENV, plugin, run=_fake_ldd(LDD_MISSING, seen), platform="linux")
    assert seen == [["ldd", str(plugin), str(plugin.parents[2] / "lib" / "libQt6XcbQpa.so.6")]]
    assert msg == (
        "the Qt xcb platform plugin cannot load libxcb-cursor.so.0, libxcb-icccm.so.4, libxkbcommon-x11.so.0, "
        "libweird.so.9; install them with: sudo apt-get install libxcb-cursor0 libxcb-icccm4 libxkbcommon-x11-0 "
        "libweird.so.9"
    )


def test_xcb_problem_is_none_when_all_load_or_not_applicable(plugin):
    assert xcb_problem(XCB_ENV, plugin, run=_fake_ldd(LDD_OK), platform="linux") is None
    seen: list = []
    offscreen = dict(XCB_ENV, QT_QPA_PLATFORM="offscreen")
    assert xcb_problem(offscreen, plugin, run=_fake_ldd(LDD_MISSING, seen), platform="linux") is None
    assert seen == []  # not even run
    assert xcb_problem(XCB_ENV, plugin.parent / "absent.so", run=_fake_ldd(LDD_MISSING), platform="linux") is None

    def no_ldd(cmd, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", "ldd")

    assert xcb_problem(XCB_ENV, plugin, run=no_ldd, platform="linux") is None


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("ldd") is None, reason="Linux with ldd")
def test_xcb_problem_with_the_real_plugin_is_fast_and_silent_when_the_libraries_are_here():
    """The installed PySide6's plugin, through the real ldd (the libraries are installed here)."""
    import time

    path = platform_check.xcb_plugin_path()
    assert path is not None and path.name == "libqxcb.so"
    t0 = time.perf_counter()
    msg = xcb_problem(dict(os.environ, DISPLAY=":99", QT_QPA_PLATFORM="xcb"), platform="linux")
    elapsed = time.perf_counter() - t0
    if msg is not None:  # a machine without the xcb libraries: then the message is the one line
        assert re.match(r"the Qt xcb platform plugin cannot load \S+.*; install them with: sudo apt-get install ", msg)
    assert elapsed < 2.0, elapsed  # ~20 ms here; loose so a busy machine does not fail it


def test_main_exits_1_with_one_line_before_creating_the_qapplication(monkeypatch, capsys):
    from gui import app

    problem = (
        "the Qt xcb platform plugin cannot load libxcb-cursor.so.0; "
        "install them with: sudo apt-get install libxcb-cursor0"
    )
    monkeypatch.setattr(app, "display_problem", lambda: None)
    monkeypatch.setattr(app, "xcb_problem", lambda: problem)

    def no_qapplication(*a, **k):
        raise AssertionError("QApplication created despite the xcb problem")

    monkeypatch.setattr(app, "create_application", no_qapplication)
    assert app.main([]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [f"decoding-explorer: error: {problem}"]


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_readme_names_every_package_make_installs():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## System packages", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"[\w.+-]+", " ".join(re.findall(r"`([^`]*)`", section))))
    assert set(_make_var("RUN_PACKAGES") + _make_var("TEST_PACKAGES")) - named == set()
