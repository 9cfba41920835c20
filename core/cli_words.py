"""``transcribe --word-timestamps``: word-level timestamps from cross-attention (DTW over the
alignment heads, ``core.analysis.alignment``, as openai/whisper ``timing.py``)."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from core.events import Finished, StepEvent


def add_word_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--word-timestamps`` flag of ``transcribe``."""
    parser.add_argument("--word-timestamps", action="store_true",
                        help="time each word by DTW over the alignment heads' cross-attention (openai/whisper "
                             "timing.py); --json gains \"words\": [{word, start, end, prob}] in seconds")


def word_rows(words) -> list[dict]:
    """The JSON ``"words"``: seconds rounded to ms, prob to 6 places."""
    return [{"word": w.word, "start": round(w.start, 3), "end": round(w.end, 3), "prob": round(w.prob, 6)}
            for w in words]


def emit_words(model, audio, options, prefix: list[int], args: argparse.Namespace) -> int:
    """Decode with the cross-attention captured, time the words (the end-of-text rows fed
    again, ``SpeechModel.end_attention``), print: ``--json`` the trace with ``"words"``,
    else the text then one ``start end word`` line per word."""
    from core.cli import trace

    options = replace(options, capture_attention=True)
    kw = {"language": args.language, "task": args.task, "timestamps": bool(getattr(args, "timestamps", False)),
          "candidate_languages": getattr(args, "language_candidates", None)}
    events = list(model.decode(audio, options, prefix_ids=prefix, **kw))
    steps = [ev for ev in events if isinstance(ev, StepEvent)]
    rows = word_rows(model.words(steps, end_attention=model.end_attention(audio, steps, options, **kw)))
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
