"""Before the QApplication exists: can Qt's xcb platform plugin load its libraries?

When a shared library of the xcb plugin is missing, Qt aborts with "could not load the
Qt platform plugin "xcb"" (and since 6.5 a hint about libxcb-cursor0 alone, even when
another library is the one missing). ``ldd`` on the plugin names every missing library
at once, so the app can say which Debian packages to install and exit 1 instead.

Stdlib only; ``PySide6`` is imported for its package path, never ``QtWidgets``/``QtGui``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterable, Mapping

# Library soname -> the Debian/Ubuntu package that ships it: the xcb plugin's
# dependencies (``ldd libqxcb.so``) that are not bundled in the PySide6 wheel.
DEBIAN_PACKAGES: dict[str, str] = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-xinerama.so.0": "libxcb-xinerama0",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxcb-glx.so.0": "libxcb-glx0",
    "libxcb.so.1": "libxcb1",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libX11.so.6": "libx11-6",
    "libXau.so.6": "libxau6",
    "libXdmcp.so.6": "libxdmcp6",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libGL.so.1": "libgl1",
    "libEGL.so.1": "libegl1",
    "libOpenGL.so.0": "libopengl0",
    "libGLX.so.0": "libglx0",
    "libGLdispatch.so.0": "libglvnd0",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libdbus-1.so.3": "libdbus-1-3",
    "libexpat.so.1": "libexpat1",
    "libpng16.so.16": "libpng16-16",
    "libz.so.1": "zlib1g",
    "libzstd.so.1": "libzstd1",
    "libbrotlidec.so.1": "libbrotli1",
    "libpcre2-8.so.0": "libpcre2-8-0",
}

Runner = Callable[..., subprocess.CompletedProcess]


def missing_libraries(ldd_output: str) -> list[str]:
    """The sonames that ``ldd`` reports as ``=> not found``, once each, in order of appearance.

    Other lines (found libraries, ``path:`` headers of a multi-file run, errors) are ignored.
    """
    missing: list[str] = []
    for line in ldd_output.splitlines():
        name, sep, where = line.partition("=>")
        if sep and where.strip() == "not found":
            lib = name.strip()
            if lib and lib not in missing:
                missing.append(lib)
    return missing


def packages_for(libs: Iterable[str]) -> list[str]:
    """The Debian packages that ship ``libs`` (``DEBIAN_PACKAGES``), once each, in order.

    A soname the table does not know is returned as it is, so the user still sees it.
    """
    packages: list[str] = []
    for lib in libs:
        package = DEBIAN_PACKAGES.get(lib, lib)
        if package not in packages:
            packages.append(package)
    return packages


def qt_uses_xcb(environ: Mapping[str, str] = os.environ, platform: str = sys.platform) -> bool:
    """Whether Qt will pick its xcb (X11) platform plugin in this environment.

    True on Linux when ``QT_QPA_PLATFORM`` names ``xcb`` first (``xcb``, ``xcb:args``,
    ``xcb;wayland``), or when it is unset, ``DISPLAY`` is set and ``WAYLAND_DISPLAY`` is not.
    """
    if not platform.startswith("linux"):
        return False
    chosen = environ.get("QT_QPA_PLATFORM", "").strip()
    if chosen:
        return chosen.split(";")[0].split(":")[0].strip() == "xcb"
    return bool(environ.get("DISPLAY")) and not environ.get("WAYLAND_DISPLAY")


def xcb_plugin_path() -> Path | None:
    """``PySide6/Qt/plugins/platforms/libqxcb.so`` of the installed PySide6, or None without one."""
    try:
        import PySide6
    except ImportError:
        return None
    path = Path(PySide6.__file__).resolve().parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return path if path.is_file() else None


def xcb_problem(
    environ: Mapping[str, str] = os.environ,
    plugin_path: Path | None = None,
    run: Runner = subprocess.run,
    platform: str = sys.platform,
) -> str | None:
    """Why Qt's xcb platform plugin cannot load, as one sentence with the fix, or None.

    Runs ``ldd`` on the plugin and on the ``libQt6XcbQpa.so.6`` beside PySide6's Qt
    libraries only when Qt would use xcb (``qt_uses_xcb``). Returns None when it loads,
    when Qt will use another platform, when the plugin is not found, or when ``ldd``
    cannot run (missing, timed out): the check is skipped rather than guessed.

    Args:
        environ: the environment Qt will see.
        plugin_path: ``libqxcb.so`` (default: ``xcb_plugin_path()``).
        run: ``subprocess.run`` or a stand-in for tests.
        platform: ``sys.platform``.
    """
    if not qt_uses_xcb(environ, platform):
        return None
    plugin = Path(plugin_path) if plugin_path is not None else xcb_plugin_path()
    if plugin is None or not plugin.is_file():
        return None
    targets = [str(plugin)]
    qpa = plugin.parent.parent.parent / "lib" / "libQt6XcbQpa.so.6"
    if qpa.is_file():
        targets.append(str(qpa))
    try:
        out = run(["ldd", *targets], capture_output=True, text=True, timeout=10, env=dict(environ))
    except (OSError, subprocess.SubprocessError):
        return None
    libs = missing_libraries(out.stdout or "")
    if not libs:
        return None
    return (
        f"the Qt xcb platform plugin cannot load {', '.join(libs)}; "
        f"install them with: sudo apt-get install {' '.join(packages_for(libs))}"
    )
