"""``transcribe --word-timestamps``: word-level timestamps from cross-attention (DTW over the
alignment heads, ``core.analysis.alignment``, as openai/whisper ``timing.py``); ``--refine``
moves them by muting the audio around each boundary (``core.analysis.refine``, as stable-ts
``refine()``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace

from core.analysis.silence import snap_words
from core.cli.options import dtype_of
from core.cli.trace import speech_notes, trace, vocab_size_of
from core.events import Finished, StepEvent


def add_word_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--word-timestamps`` flag of ``transcribe``."""
    parser.add_argument("--word-timestamps", action="store_true",
                        help="time each word by DTW over the alignment heads' cross-attention (openai/whisper "
                             "timing.py); --json gains \"words\": [{word, start, end, prob}] in seconds")
    parser.add_argument("--no-silence-snap", action="store_true",
                        help="keep the DTW times as they are; by default a word's start (end) moves off the quiet "
                             "audio before (after) it (20 ms frames 35 dB below the loudest, or within 6 dB of the "
                             "noise floor; core.analysis.silence)")
    parser.add_argument("--refine", action=_Refine, nargs=0,
                        help="(implies --word-timestamps) then move each word's start and end to where muting the "
                             "audio starts to lower its probability (as stable-ts refine(); about 20 extra encoder "
                             "passes per 30 s window: with tiny.en about 16 s per window on 2 CPU cores); --json words "
                             "keep the DTW times as dtw_start/dtw_end. Works on fixed and long-form windows (each "
                             "word within its own window's audio); --progress prints 'refining words i/n'")
    parser.add_argument("--refine-budget", type=_seconds, default=REFINE_BUDGET_S, metavar="S",
                        help="stop refining after S seconds; the words not reached keep their DTW times and stderr "
                             "says how many were refined; 'none' = no limit (default: %(default)s; with tiny.en about 16 s "
                             "per 30 s window on 2 CPU cores, 30 s on one: 600 s covers 10-20 minutes of speech)")


#: seconds ``--refine`` may take by default. tiny.en, 150 s espeak clip (6 windows, 412 words), 2 quiet CPU
#: cores: refine 98 s (16 s per window, 0.24 s per word) after an 18 s decode; a 10-minute file (~24 windows)
#: needs ~390 s, so 600 s refines it whole there and bounds it on slower machines

REFINE_BUDGET_S = 600.0


def _seconds(text: str) -> float | None:
    if text.strip().lower() in ("none", "off"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds (e.g. 300) or 'none', got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0 or 'none', got {text!r}")
    return value


class _Refine(argparse.Action):
    """``--refine``: sets ``refine`` and ``word_timestamps``."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.refine = True
        namespace.word_timestamps = True


def refine_progress(args: argparse.Namespace, every_s: float = 1.0):
    """The ``progress`` callback of ``SpeechModel.refine_words`` for the CLI: with ``--progress``
    (or stderr a terminal) a "refining words i/n" line on stderr at most every ``every_s``
    seconds and at the end; None otherwise."""
    if not (getattr(args, "progress", False) or sys.stderr.isatty()):
        return None
    last = [0.0, -1]
    begun = time.perf_counter()

    def show(done: int, total: int) -> None:
        now = time.perf_counter()
        if done == last[1] or (done < total and now - last[0] < every_s):
            return
        last[0], last[1] = now, done
        print(f"refining words {done}/{total} · {now - begun:.0f} s", file=sys.stderr, flush=True)

    return show


def refine_note(report: dict, args: argparse.Namespace) -> None:
    """Say on stderr when refine stopped at its budget (how many words it refined, what the
    rest keep), and with ``--progress`` how long it took."""
    if report.get("stopped") == "budget":
        left = report["words"] - report["refined"]
        print(f"refine stopped at its budget (--refine-budget {args.refine_budget:g} s): {report['refined']} of "
              f"{report['words']} words refined ({report['windows_refined']} of {report['windows']} windows); the "
              f"other {left} keep their DTW times. Give a larger --refine-budget (or 'none') to refine them all.",
              file=sys.stderr, flush=True)
    elif getattr(args, "progress", False):
        print(f"refined {report.get('refined', 0)} words in {report.get('seconds', 0.0):.0f} s", file=sys.stderr)


def word_rows(words, dtw=None) -> list[dict]:
    """The JSON ``"words"``: seconds rounded to ms, prob to 6 places; with ``dtw`` (the same
    words before refining) also ``dtw_start``/``dtw_end``."""
    rows = [{"word": w.word, "start": round(w.start, 3), "end": round(w.end, 3), "prob": round(w.prob, 6)}
            for w in words]
    for row, w in zip(rows, dtw or ()):
        row["dtw_start"], row["dtw_end"] = round(w.start, 3), round(w.end, 3)
    return rows


def emit_words(model, audio, options, prefix: list[int], args: argparse.Namespace) -> int:
    """Decode with the cross-attention captured, time the words (the end-of-text rows fed
    again, ``SpeechModel.end_attention``; with ``--refine`` moved by ``SpeechModel.refine_words``),
    print: ``--json`` the trace with ``"words"``, else the text then one ``start end word`` line
    per word."""
    options = replace(options, capture_attention=True)
    kw = {"language": args.language, "task": args.task, "timestamps": bool(getattr(args, "timestamps", False)),
          "candidate_languages": getattr(args, "language_candidates", None)}
    events = list(speech_notes(model, model.decode(audio, options, prefix_ids=prefix, **kw), audio))
    steps = [ev for ev in events if isinstance(ev, StepEvent)]
    snap = not getattr(args, "no_silence_snap", False)
    dtw = model.words(steps, end_attention=model.end_attention(audio, steps, options, **kw))
    words = snap_words(dtw, audio) if snap else dtw
    if getattr(args, "refine", False):  # refine DTW's words, then (by default) move them off silence
        report: dict = {}
        refined = model.refine_words(audio, steps, dtw, options, progress=refine_progress(args), report=report,
                                     budget_s=getattr(args, "refine_budget", None), **kw)
        refine_note(report, args)
        rows = word_rows(snap_words(refined, audio) if snap else refined, dtw=dtw)
    else:
        rows = word_rows(words)
    if args.json:
        out = trace("transcribe", model.name, options, events, args.attention, vocab_size_of(model), dtype_of(model))
        if kw["timestamps"]:
            out["segments"] = model.segments(events)
        out["words"] = rows
        if getattr(args, "refine", False):
            out["refine"] = report
        print(json.dumps(out, ensure_ascii=False, indent=1))
        return 0
    print(next(ev.text for ev in events if isinstance(ev, Finished)))
    for r in rows:
        print(f"{r['start']:8.2f} {r['end']:8.2f}  {r['word'].strip()}")
    return 0
