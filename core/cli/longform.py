"""``transcribe`` long-form: openai/whisper ``transcribe()`` from the command line.

``--windows auto`` (the default) decodes long-form (``core.tasks.longform``: seek by
timestamps, previous-text conditioning, temperature fallback, silence skipping) when the
audio is longer than 30 s or an ``--output-format`` is asked for, and plain 30 s windows
otherwise (as transformers' ``generate()`` switches between short- and long-form);
``long-form`` and ``fixed`` force one. Output, as openai/whisper's CLI:

- text: one ``[start --> end] text`` line per segment (``--json``: the trace of the kept
  tokens plus ``"segments"``, ``"attempts"`` and ``"language"``);
- ``--output-format txt|vtt|srt|tsv|json|all --output-dir DIR``: files written by
  ``core.tasks.writers`` (word-level cues with ``--word-timestamps``);
- a progress line on stderr per window when stderr is a terminal or ``--progress`` is given.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from core.events import AttemptEvent, Finished
from core.tasks.longform import LongFormOptions

WINDOWS = ("auto", "long-form", "fixed")


def _threshold(text: str) -> float | None:
    """A threshold flag's value: a number, or "none" to switch the check off."""
    if text.strip().lower() in ("none", "off"):
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'none', got {text!r}") from None


def _temperatures(text: str) -> tuple[float, ...]:
    try:
        temperatures = tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated temperatures like 0,0.2,0.4, got {text!r}") from None
    if not temperatures:
        raise argparse.ArgumentTypeError(
            f"needs at least one temperature, got {text!r}; write e.g. 0,0.2,0.4,0.6,0.8,1.0 (the default), "
            "or 0 for no fallback")
    return temperatures


def add_longform_arguments(parser: argparse.ArgumentParser) -> None:
    """The long-form flags of ``transcribe`` (defaults are openai/whisper's)."""
    d = LongFormOptions()
    g = parser.add_argument_group("long-form (openai/whisper transcribe())")
    g.add_argument("--windows", choices=WINDOWS, default="auto",
                   help="auto: long-form for audio over 30 s or with --output-format, plain 30 s windows otherwise; "
                        "long-form: seek by timestamps with temperature fallback; fixed: plain 30 s windows "
                        "(default: %(default)s)")
    g.add_argument("--fallback-temperatures", type=_temperatures, default=d.temperatures, metavar="T,T,...",
                   help="temperatures tried in turn when a window fails a threshold (default: 0,0.2,...,1.0)")
    g.add_argument("--compression-ratio-threshold", type=_threshold, default=d.compression_ratio_threshold,
                   metavar="X", help="redo a window whose text's gzip ratio is above X; 'none' = off (default: %(default)s)")
    g.add_argument("--logprob-threshold", type=_threshold, default=d.logprob_threshold, metavar="X",
                   help="redo a window whose average log-probability is below X; 'none' = off (default: %(default)s)")
    g.add_argument("--no-speech-threshold", type=_threshold, default=d.no_speech_threshold, metavar="P",
                   help="skip a window whose no-speech probability is above P and whose average log-probability "
                        "is below --logprob-threshold; 'none' = off (default: %(default)s)")
    g.add_argument("--entropy-threshold", type=_threshold, default=d.entropy_threshold, metavar="H",
                   help="redo a window of > 32 tokens whose last 32 tokens' entropy is below H nats "
                        "(whisper.cpp --entropy-thold); 'none' = off (default: %(default)s)")
    g.add_argument("--silence-db", type=_threshold, default=d.silence_db, metavar="DB",
                   help="also skip a no-speech window whose loudest 20 ms is below DB dBFS; 'none' = off "
                        "(default: %(default)s)")
    g.add_argument("--no-condition-on-previous-text", action="store_true",
                   help="do not prompt each window with the text before it (openai: --condition_on_previous_text False)")
    g.add_argument("--initial-prompt", default="", metavar="TEXT",
                   help="text given as the previous text of the first window (names, spelling, style)")
    g.add_argument("--output-format", "-f", choices=("txt", "vtt", "srt", "tsv", "json", "all"), default=None,
                   help="write the transcript to files in --output-dir, as openai/whisper's CLI")
    g.add_argument("--output-dir", "-o", default=".", metavar="DIR", help="where --output-format writes (default: .)")
    g.add_argument("--highlight-words", action="store_true", help="srt/vtt: underline each word as it is spoken "
                                                                 "(needs --word-timestamps)")
    g.add_argument("--max-line-width", type=int, default=None, metavar="N",
                   help="srt/vtt: wrap cues at N characters (needs --word-timestamps)")
    g.add_argument("--max-line-count", type=int, default=None, metavar="N",
                   help="srt/vtt: at most N lines per cue (needs --word-timestamps)")
    g.add_argument("--max-words-per-line", type=int, default=None, metavar="N",
                   help="srt/vtt: at most N words per cue (needs --word-timestamps)")
    g.add_argument("--progress", action="store_true", help="print one progress line per window on stderr")


def use_longform(args: argparse.Namespace, audio_s: float) -> bool:
    """Whether ``transcribe`` decodes long-form (``--windows``; auto: > 30 s or files asked for)."""
    if args.windows != "auto":
        return args.windows == "long-form"
    return audio_s > 30.0 or args.output_format is not None


def longform_options(args: argparse.Namespace) -> LongFormOptions:
    """The LongFormOptions the flags give (validated: ValueError names the bad one)."""
    return LongFormOptions(
        temperatures=args.fallback_temperatures, compression_ratio_threshold=args.compression_ratio_threshold,
        logprob_threshold=args.logprob_threshold, no_speech_threshold=args.no_speech_threshold,
        entropy_threshold=args.entropy_threshold, silence_db=args.silence_db,
        condition_on_previous_text=not args.no_condition_on_previous_text, initial_prompt=args.initial_prompt,
    ).validate()


def check_writer_options(args: argparse.Namespace) -> None:
    """Reject subtitle options openai/whisper's CLI rejects, before any decoding (ValueError)."""
    from core.tasks.writers import check_options

    check_options(word_timestamps=args.word_timestamps, highlight_words=args.highlight_words,
                  max_line_width=args.max_line_width, max_line_count=args.max_line_count,
                  max_words_per_line=args.max_words_per_line)


def longform_words(model, events, audio=None) -> list:
    """Word timestamps of a long-form run's transcript (DTW, ``SpeechModel.words``): the kept
    tokens of each window, its end row the end-of-text attention or, when the window's tail
    was dropped, the attention of the first dropped token (the query after the last kept one);
    moved off silence when ``audio`` is given."""
    steps, end = [], {}
    for ev in events:
        if isinstance(ev, AttemptEvent) and ev.kept_in_transcript and ev.kept_tokens:
            kept = ev.steps[: ev.kept_tokens]
            steps.extend(kept)
            end[ev.segment] = ev.end_attention if ev.kept_tokens == len(ev.steps) else \
                ev.steps[ev.kept_tokens].cross_attention
    return model.words(steps, end_attention=end, audio=audio)


def attach_words(result: dict, words) -> None:
    """Give each result segment its words (openai's ``"words"``: word, start, end, probability),
    a word going to the segment whose span holds its middle (else the nearest)."""
    segs = result["segments"]
    for s in segs:
        s["words"] = []
    for w in words:
        if not segs:
            break
        mid = (w.start + w.end) / 2
        best = min(segs, key=lambda s: 0 if s["start"] <= mid <= s["end"] else min(abs(mid - s["start"]),
                                                                                     abs(mid - s["end"])))
        best["words"].append({"word": w.word, "start": round(w.start, 3), "end": round(w.end, 3),
                              "probability": round(w.prob, 6)})


def attempt_rows(events) -> list[dict]:
    """The JSON ``"attempts"``: every attempt of every window with its numbers and verdict."""
    rows = []
    for ev in events:
        if isinstance(ev, AttemptEvent):
            rows.append({"window": ev.segment, "attempt": ev.attempt, "seek": ev.seek, "start": round(ev.start, 3),
                         "end": round(ev.end, 3), "temperature": ev.temperature,
                         "compression_ratio": round(ev.compression_ratio, 4), "avg_logprob": round(ev.avg_logprob, 4),
                         "no_speech_prob": None if ev.no_speech_prob is None else round(ev.no_speech_prob, 4),
                         "entropy": round(ev.entropy, 4), "verdict": ev.verdict, "reasons": list(ev.reasons),
                         "kept": ev.kept_in_transcript, "text": ev.text})
    return rows


def _timestamp(seconds: float) -> str:
    m, s = divmod(seconds, 60)
    return f"{int(m):02d}:{s:06.3f}"


def run_longform(model, audio, options, prefix: list[int], args: argparse.Namespace) -> int:
    """Decode long-form and print / write the result; 0 on success (130 when cancelled)."""
    from core.cli.options import dtype_of
    from core.cli.trace import say_speculative, trace, vocab_size_of
    from core.tasks.writers import write_result
    from core.tasks.longform import result_dict, transcript_events

    longform = longform_options(args)
    if args.word_timestamps:
        options = replace(options, capture_attention=True)
    progress = args.progress or sys.stderr.isatty()
    total_s = len(audio) / 16000
    events = []
    for ev in model.transcribe(audio, options, longform, language=args.language, task=args.task,
                               candidate_languages=args.language_candidates, prefix_ids=prefix):
        events.append(ev)
        if progress and isinstance(ev, AttemptEvent):
            print(f"window {ev.segment + 1} {_timestamp(ev.start)}–{_timestamp(min(ev.end, total_s))} of "
                  f"{_timestamp(total_s)} · T={ev.temperature:g} · {ev.verdict}"
                  + (f" ({'; '.join(ev.reasons)})" if ev.reasons else ""), file=sys.stderr, flush=True)
    from core.tasks.longform_verdicts import attempt_warning, silence_note

    for ev in events:
        if isinstance(ev, AttemptEvent) and attempt_warning(ev, longform.no_speech_threshold):
            print(f"warning: {attempt_warning(ev, longform.no_speech_threshold)}", file=sys.stderr, flush=True)
    note = silence_note([(ev.no_speech_prob, ev.loudest_db) for ev in events
                         if isinstance(ev, AttemptEvent) and ev.verdict == "silence"])
    if note:
        print(note, file=sys.stderr, flush=True)
    kept = transcript_events(events)
    result = result_dict(kept, model.last_language)
    words = longform_words(model, kept, None if args.no_silence_snap else audio) if args.word_timestamps else []
    dtw = None
    if getattr(args, "refine", False) and words:  # refine DTW's words, each within its window, then snap
        from core.analysis.silence import snap_words
        from core.cli.words import refine_progress

        dtw = longform_words(model, kept)
        steps = [s for ev in kept if isinstance(ev, AttemptEvent) and ev.kept_in_transcript for s in ev.steps]
        from core.cli.words import refine_note

        report: dict = {}
        refined = model.refine_words(audio, steps, dtw, options, language=args.language, task=args.task,
                                     candidate_languages=args.language_candidates, longform=True,
                                     progress=refine_progress(args), budget_s=args.refine_budget, report=report)
        refine_note(report, args)
        words = refined if args.no_silence_snap else snap_words(refined, audio)
    if args.word_timestamps:
        attach_words(result, words)
    if args.output_format:
        paths = write_result(result, args.file, args.output_dir, args.output_format,
                             word_timestamps=args.word_timestamps, highlight_words=args.highlight_words,
                             max_line_width=args.max_line_width, max_line_count=args.max_line_count,
                             max_words_per_line=args.max_words_per_line)
        for p in paths:
            print(f"wrote {p}", file=sys.stderr)
    finished = next(ev for ev in events if isinstance(ev, Finished))
    if args.json:
        out = trace("transcribe", model.name, options, (ev for ev in kept if not isinstance(ev, AttemptEvent)),
                    args.attention, vocab_size_of(model), dtype_of(model))
        out["language"] = model.last_language
        out["segments"] = [{k: s[k] for k in ("id", "seek", "start", "end", "text", "temperature", "avg_logprob",
                                               "compression_ratio", "no_speech_prob")}
                           | ({"words": s["words"]} if "words" in s else {}) for s in result["segments"]]
        out["attempts"] = attempt_rows(events)
        if args.word_timestamps:
            from core.cli.words import word_rows

            out["words"] = word_rows(words, dtw=dtw)
            if dtw is not None:
                out["refine"] = report
        print(json.dumps(out, ensure_ascii=False, indent=1))
    elif not args.output_format:
        for s in result["segments"]:
            print(f"[{_timestamp(s['start'])} --> {_timestamp(s['end'])}]{s['text']}")
    if not args.json:
        say_speculative(finished.stats.speculative)  # speculative decoding: α, tokens per target call
    return 130 if finished.cancelled else 0


__all__ = ["add_longform_arguments", "attach_words", "attempt_rows", "check_writer_options", "longform_options",
           "longform_words", "run_longform", "use_longform"]
