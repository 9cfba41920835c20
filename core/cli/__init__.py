"""The headless commands of ``decoding-explorer``: ``commands`` (the parser, the dispatcher
``main`` and one ``cmd_*`` per subcommand) and one module per concern: ``options`` (the shared
decoding flags), ``longform`` and ``words`` (transcribe), ``translate`` and ``ocr`` (progress and
notes on stderr), ``lanes`` (``--compare``), ``trace`` (the JSON trace and a run's notes)."""

from core.cli.commands import build_parser, main
from core.cli.trace import trace

__all__ = ["build_parser", "main", "trace"]
