"""``transcribe --word-timestamps``: word-level timestamps from cross-attention (DTW over the
alignment heads, ``core.analysis.alignment``, as openai/whisper ``timing.py``); ``--refine``
moves them by muting the audio around each boundary (``core.analysis.refine``, as stable-ts
``refine()``)."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from core.analysis.silence import snap_words
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
                             "passes per 30 s window); --json words keep the DTW times as dtw_start/dtw_end. Fixed "
                             "30 s windows only (audio <= 30 s, or --windows fixed)")


class _Refine(argparse.Action):
    """``--refine``: sets ``refine`` and ``word_timestamps``."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.refine = True
        namespace.word_timestamps = True


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
    from core.cli import trace

    options = replace(options, capture_attention=True)
    kw = {"language": args.language, "task": args.task, "timestamps": bool(getattr(args, "timestamps", False)),
          "candidate_languages": getattr(args, "language_candidates", None)}
    events = list(model.decode(audio, options, prefix_ids=prefix, **kw))
    steps = [ev for ev in events if isinstance(ev, StepEvent)]
    snap = not getattr(args, "no_silence_snap", False)
    dtw = model.words(steps, end_attention=model.end_attention(audio, steps, options, **kw))
    words = snap_words(dtw, audio) if snap else dtw
    if getattr(args, "refine", False):  # refine DTW's words, then (by default) move them off silence
        refined = model.refine_words(audio, steps, dtw, options, **kw)
        rows = word_rows(snap_words(refined, audio) if snap else refined, dtw=dtw)
    else:
        rows = word_rows(words)
    if args.json:
        out = trace("transcribe", model.name, options, events, args.attention)
        if kw["timestamps"]:
            out["segments"] = model.segments(events)
        out["words"] = rows
        print(json.dumps(out, ensure_ascii=False, indent=1))
        return 0
    print(next(ev.text for ev in events if isinstance(ev, Finished)))
    for r in rows:
        print(f"{r['start']:8.2f} {r['end']:8.2f}  {r['word'].strip()}")
    return 0
