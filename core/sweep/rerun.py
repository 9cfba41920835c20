"""The single-run command line of a sweep row, for its trace's ``"rerun"`` block, so that
``decoding-explorer replay`` can rerun the row's file alone (after ``gunzip``) and check it
gives the same ids.

The decoding flags are found by trial against the CLI's own parser (``add_decoding_arguments``
and ``options_from_args``): each option that differs from the defaults gets the flag that
sets it, and the whole command line is parsed back and must give exactly the row's options;
otherwise there is no command line (None), and replay says the trace cannot be rerun.
"""

from __future__ import annotations

import argparse
from functools import lru_cache

from core.options import DecodingOptions

#: flags that are not decoding options (or are set apart)
_SKIP = {"preset", "sampler_order", "strategy", "json", "attention", "logit_lens", "dtype", "help"}
#: fields the CLI sets from other flags, not to compare
_DERIVED = {"capture_attention", "capture_lens"}


class _QuietParser(argparse.ArgumentParser):
    """A parser whose errors are exceptions (a trial flag that does not fit prints nothing)."""

    def error(self, message: str):
        raise ValueError(message)


@lru_cache(maxsize=1)
def _parser() -> argparse.ArgumentParser:
    from core.cli.options import add_decoding_arguments

    p = _QuietParser(add_help=False)
    add_decoding_arguments(p)
    return p


def _options(flags: list[str]) -> DecodingOptions | None:
    from core.cli.options import options_from_args

    try:
        return options_from_args(_parser().parse_args(flags))
    except (SystemExit, ValueError, TypeError):
        return None


@lru_cache(maxsize=256)
def _flag_for(field: str, value_text: str) -> str | None:
    """The flag that sets ``field`` to the value written ``value_text`` (None if none does)."""
    want = _options_value(field, value_text)
    for action in _parser()._actions:
        if not action.option_strings or action.dest in _SKIP or action.nargs == 0:
            continue
        flag = action.option_strings[-1]
        got = _options([flag, value_text])
        if got is not None and getattr(got, field) == want and _only_changes(got, field):
            return flag
    return None


def _options_value(field: str, value_text: str):
    kind = type(getattr(DecodingOptions(), field))
    try:
        return kind(value_text) if kind in (int, float) else value_text
    except ValueError:
        return value_text


def _only_changes(options: DecodingOptions, field: str) -> bool:
    base = DecodingOptions().to_dict()
    return all(v == base[k] for k, v in options.to_dict().items() if k != field and k not in _DERIVED)


def decoding_flags(options: DecodingOptions) -> list[str] | None:
    """The CLI flags that give ``options`` (``--strategy`` and one flag per changed field), or
    None when some option has no flag that round-trips."""
    base, mine = DecodingOptions().to_dict(), options.to_dict()
    flags = ["--strategy", options.strategy.replace("_", "-")] if options.strategy != base["strategy"] else []
    for field, value in mine.items():
        if field in _DERIVED or field == "strategy" or value == base[field]:
            continue
        if value is None or isinstance(value, (list, tuple, dict, bool)):
            return None
        text = repr(value) if isinstance(value, float) else str(value)
        flag = _flag_for(field, text)
        if flag is None:
            return None
        flags += [flag, text]
    got = _options(flags)
    if got is None or {k: v for k, v in got.to_dict().items() if k not in _DERIVED} != \
            {k: v for k, v in mine.items() if k not in _DERIVED}:
        return None
    return flags


def single_run_argv(task: str, settings, options: DecodingOptions, *, path: str | None = None,
                    text: str | None = None) -> list[str] | None:
    """The command line (without the program name) that decodes one input alone with
    ``options`` and ``settings`` (``core.sweep.decode.Settings``): ``transcribe FILE``,
    ``ocr IMAGE`` or ``translate TEXT``; None when the input is not a file or text, or the
    options have no round-tripping flags."""
    flags = decoding_flags(options)
    if flags is None:
        return None
    if task == "transcribe" and path:
        argv = ["transcribe", path, "--model", settings.model, "--language", settings.language,
                "--task", settings.whisper_task]
        if settings.dtype != "float32":
            argv += ["--dtype", settings.dtype]
    elif task == "ocr" and path:
        argv = ["ocr", path, "--model", settings.model]
    elif task == "translate" and text is not None:
        argv = ["translate", text, "--direction", settings.model]
        for flag, value in (("--target-language", settings.target_language),
                            ("--source-language", settings.source_language),
                            ("--source-prefix", settings.source_prefix)):
            if value is not None:
                argv += [flag, value]
        if settings.shortlist:
            argv.append("--shortlist")
        if settings.dtype != "float32":
            argv += ["--dtype", settings.dtype]
    else:
        return None
    return argv + flags + ["--json"]
