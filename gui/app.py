"""Entry point: ``decoding-explorer`` (the console script) and ``python -m gui.app``.

``decoding-explorer transcribe|translate|ocr ...`` (and ``--help``, ``--version``) runs
the headless commands of ``core.cli`` without importing Qt; with no command it opens the
window at once, and models load in worker threads afterwards (torch is never imported
before the window is shown). The dependency points one way: gui imports core, never the
reverse.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Sequence

from .platform_check import xcb_problem

#: first arguments that are handled by core.cli (no window, no Qt import)
HEADLESS = ("transcribe", "translate", "ocr", "stream", "replay", "sweep", "-h", "--help", "--version")


def display_problem(environ=os.environ, platform: str = sys.platform) -> str | None:
    """Why no window can open, or None.

    On Linux Qt needs an X11 or Wayland display unless ``QT_QPA_PLATFORM`` picks another
    platform plugin (e.g. ``offscreen``); without one it aborts with a terse message.
    """
    if not platform.startswith("linux") or environ.get("QT_QPA_PLATFORM"):
        return None
    if environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"):
        return None
    return (
        "no display found (DISPLAY and WAYLAND_DISPLAY are unset): run Decoding Explorer in a desktop "
        "session, or under a virtual display with `xvfb-run -a decoding-explorer`; for headless decoding "
        "use the commands `decoding-explorer transcribe|ocr|translate ...` (see --help)."
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The console entry point: a headless command (see ``HEADLESS``) goes to
    ``core.cli.main``; anything else opens the window (:func:`run_window`).

    Args:
        argv: the arguments after the program name (default ``sys.argv[1:]``).

    Returns:
        the exit status: 0 success, 1 bad input or no display, 2 usage error.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in HEADLESS:
        from core.cli import main as cli_main

        return cli_main(args)
    return run_window(["decoding-explorer", *args])


def create_application(argv: Sequence[str]):
    """The QApplication (the existing one, or a new one with ``argv``); Qt is imported only
    here and in the window modules, so headless commands never load it."""
    from PySide6.QtWidgets import QApplication

    return QApplication.instance() or QApplication(list(argv))


def run_window(argv: Sequence[str] | None = None) -> int:
    """Create the QApplication and the main window, run the event loop; return its exit code.

    Args:
        argv: Qt arguments, program name first (default ``sys.argv``); ``--no-autoload``
            opens the window without loading the default model.
    """
    # Both checks run before the QApplication exists: Qt aborts when it cannot open a window.
    problem = display_problem() or xcb_problem()
    if problem is not None:
        print(f"decoding-explorer: error: {problem}", file=sys.stderr)
        return 1
    from . import memory_policy

    memory_policy.install()  # large blocks from mmap, few malloc arenas (gui/memory_policy.py), before any thread
    argv = list(sys.argv if argv is None else argv)
    if not argv:
        argv = ["decoding-explorer"]
    autoload = "--no-autoload" not in argv
    argv = [a for a in argv if a != "--no-autoload"]
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from .main_window import APPLICATION, ORGANIZATION, MainWindow
    from .worker import wait_all

    app = create_application(argv)
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setApplicationDisplayName("Decoding Explorer")
    win = MainWindow(autoload=autoload)
    win.show()
    from . import gc_policy

    gc_policy.install(win)  # full collections skip torch's and the models' objects (gui/gc_policy.py)
    code = int(app.exec())
    if not wait_all(3000):
        # A model load cannot be interrupted and may take a minute; settings are saved
        # (closeEvent), so leave now instead of letting Qt abort on a running QThread.
        logging.getLogger(__name__).info("exiting while a model load is still running")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
