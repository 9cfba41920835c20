"""``decoding-explorer stream FILE``: a file played as a microphone through a streaming policy
(``core.streaming``), as the live mode decodes while someone speaks.

    decoding-explorer stream FILE [--policy local-agreement:2 | align-att:25 | fixed-window[:10]]
                                  [--step S] [--speed 1|max|X] [--encoder window|buffer]
                                  [--model tiny.en] [--language en]
                                  [--reference TEXT|FILE] [--max-lag 10] [--prompt-tokens N|all]
                                  [--no-forced-prefix] [--strategy ...] [--json]

Prints the committed text as it becomes final on stderr (progress) and the final transcript on
stdout; ``--json`` prints instead::

    {"task": "stream", "model", "policy", "step_s", "speed", "encoder", "options",
     "prompt_tokens",                                # local-agreement's prompt length (null: all)
     "forced_prefix",                                # local-agreement's committed prefix forced (null: other policies)
     "text",                                         # the final committed transcript
     "commits": [{"text", "audio_s", "audio_end_s", "wall_s", "latency_s"}],
     "trims": [{"start_s", "reason"}], "fell_behind": [{"lag_s", "skipped_s", "message"}],
     "waited": N,                                    # AlignAtt's stops
     "audio_s", "wall_s", "decode_s", "rtf",         # rtf = decode seconds / audio seconds
     "latency": {"mean_s", "p90_s", "words"},        # per committed word: its commit - its end (audio time)
     "tentative_shown", "revised", "revised_fraction", "decodes",
     "fallbacks",                                    # decodes done again because they looped
     "offline_text", "wer_vs_offline",               # vs what ``transcribe`` gives for the file
     "reference"?, "wer"?}                           # with --reference

``latency_s`` of a commit is from the end of its last word's audio (word timing) to the commit,
in audio time: how much more audio had arrived by then. ``--speed 1`` plays the file in real
time (the decoder may fall behind: see ``fell_behind``); ``--speed max`` feeds it as fast as the
decoder takes it (latency then counts audio, not compute). Bad flags exit 2, bad files 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from core import catalog
from core.cli.options import add_decoding_arguments, options_from_args
from core.cli.trace import CLIError
from core.streaming.short_encoder import ENCODERS

#: ``--encoder``'s default (see ``core.streaming.short_encoder`` and tests/bench/bench_streaming.py)
ENCODER_DEFAULT = "buffer"


def _policy(text: str) -> str:
    from core.streaming import parse_policy

    try:
        parse_policy(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds (a number > 0), got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def _step(text: str) -> float:
    """``--step``: seconds > 0 and below half the longest buffer (the driver decodes at least two
    steps per buffer)."""
    from core.streaming.driver import MAX_BUFFER_S

    value = _positive(text)
    if not value < MAX_BUFFER_S / 2:
        raise argparse.ArgumentTypeError(f"must be shorter than {MAX_BUFFER_S / 2:g} s (half of Whisper's "
                                         f"{MAX_BUFFER_S:g} s buffer), got {text!r}; e.g. 1.0")
    return value


def _prompt_tokens(text: str) -> int | str:
    """``--prompt-tokens``: a whole number >= 1, or "all"."""
    if text.strip().lower() == "all":
        return "all"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of tokens >= 1 or all, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, or all (all the text before the buffer), got {text!r}")
    return value


def _usage_error(message: str):
    """A bad combination of flags: one argparse-style line on stderr, exit status 2."""
    print(f"decoding-explorer stream: error: {message} (see decoding-explorer stream --help)", file=sys.stderr)
    raise SystemExit(2)


def _speed(text: str) -> float | None:
    if text == "max":
        return None
    try:
        return _positive(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"--speed is 1 (real time), a factor > 0 like 2, or max; got {text!r}") from None


def add_parser(sub) -> argparse.ArgumentParser:
    """Add the ``stream`` subcommand to ``sub`` (argparse subparsers); returns its parser."""
    s = sub.add_parser("stream", help="play an audio file as live input through a streaming policy "
                                      "(tentative / committed tokens, latency, RTF)")
    s.add_argument("file", help="audio file: wav, flac, ogg, mp3")
    s.add_argument("--model", default=catalog.WHISPER_DEFAULT,
                   help=f"{' | '.join(catalog.WHISPER_BUNDLED)} (bundled) | a transformers model id or directory")
    s.add_argument("--language", default="auto", help="auto (detected on the first buffer) | en | de | ...")
    s.add_argument("--policy", default="local-agreement:2", type=_policy,
                   help="local-agreement:N (whisper_streaming: commit what N consecutive decodes agree on) | "
                        "align-att:F (SimulStreaming: stop when the alignment heads attend the last F frames, "
                        "20 ms each) | fixed-window[:LENGTH_S] (whisper.cpp stream); default local-agreement:2")
    s.add_argument("--step", default=None, type=_step, metavar="S",
                   help="seconds of new audio between decodes (default: the policy's: 0.5 for local-agreement, "
                        "1.0 for align-att and fixed-window)")
    s.add_argument("--speed", default=1.0, type=_speed, metavar="1|X|max",
                   help="play the file at real time (1, default), X times faster, or as fast as decoding goes (max)")
    s.add_argument("--encoder", default=ENCODER_DEFAULT, choices=ENCODERS,
                   help="window: encode each buffer in Whisper's padded 30 s window, as offline | buffer: only the "
                        "buffer's frames + 3 s of silence (whisper.cpp's audio_ctx: several times cheaper on short "
                        f"buffers; a looping decode is redone over the window); default {ENCODER_DEFAULT}")
    s.add_argument("--max-lag", default=10.0, type=_positive, metavar="S",
                   help="when more than S seconds of audio wait undecoded, skip ahead (default 10)")
    s.add_argument("--prompt-tokens", default=None, type=_prompt_tokens, metavar="N|all",
                   help="local-agreement only: the decode's prompt keeps the last N token ids of the text before "
                        "the buffer (whisper_streaming's 200 characters are about 45 tokens), or all of it (all); "
                        "default: all of it (on session 14's sets, five for tiny.en and four for base, 45 was worse on "
                        "both and 90 within the runs' spread of all)")
    s.add_argument("--no-forced-prefix", dest="forced_prefix", action="store_false",
                   help="local-agreement only: decode the whole buffer afresh each step and drop what repeats the "
                        "committed text by word timing, as ufal/whisper_streaming does, instead of forcing the words "
                        "committed inside the buffer as the decode's start (default); costs more decode time "
                        "(session 15, tiny.en: mean latency ~1.7 s against ~1.2 s forced)")
    s.add_argument("--reference", default=None, metavar="TEXT|FILE",
                   help="the expected transcript (text, or a UTF-8 .txt file): --json adds \"wer\"")
    add_decoding_arguments(s)
    s.set_defaults(func=cmd_stream)
    return s


def cmd_stream(args: argparse.Namespace) -> int:
    """Run ``stream``; returns the exit status (CLIError / ValueError for bad input)."""
    from core.inputs.audio import AudioError, load_audio
    from core.streaming import StreamDriver, parse_policy, play, stream
    from core.streaming.decoder import WhisperDecoder
    from core.tasks.speech import SpeechModel

    options = options_from_args(args)
    if options.strategy == "speculative" and (options.draft == "branch" or options.draft.startswith("model")):
        raise CLIError(f"stream's speculative decoding drafts with --draft ngram or early-exit:L; --draft "
                       f"{options.draft} needs an earlier run or a second model per buffer: choose ngram")
    settings = {}
    if args.prompt_tokens is not None:
        if not args.policy.startswith("local-agreement"):
            _usage_error(f"--prompt-tokens applies to local-agreement only, not --policy {args.policy}")
        settings["prompt_tokens"] = None if args.prompt_tokens == "all" else args.prompt_tokens
    if not args.forced_prefix:
        if not args.policy.startswith("local-agreement"):
            _usage_error(f"--no-forced-prefix applies to local-agreement only, not --policy {args.policy}")
        settings["forced_prefix"] = False
    try:
        policy = parse_policy(args.policy, step_s=args.step, **settings)  # --step: fixed-window:3 --step 5
    except ValueError as e:
        step = "" if args.step is None else f" --step {args.step:g}"
        _usage_error(f"--policy {args.policy}{step}: {e}")
    args.step = policy.step_s  # the policy's default when --step was not given
    reference = _reference(args.reference)
    try:
        audio = load_audio(args.file)
    except AudioError as e:
        raise CLIError(str(e)) from None
    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    say(f"loading {args.model}")
    dtype = getattr(args, "dtype", "float32")
    model = SpeechModel.load(args.model, **({"dtype": dtype} if dtype != "float32" else {}))
    decoder = WhisperDecoder(model, options, language=args.language, encoder=args.encoder)
    speed = "max" if args.speed is None else f"{args.speed:g}x"
    say(f"streaming {args.file} ({len(audio) / catalog.SAMPLE_RATE:.1f} s) at {speed} with {args.policy}, "
        f"step {args.step:g} s, {args.encoder} encoder")
    driver = StreamDriver(policy, decoder, max_lag_s=max(args.max_lag, args.step), realtime=args.speed)
    out = summary(stream(driver, play(audio, speed=args.speed)), say)
    say("decoding the file offline for comparison")
    offline = offline_text(model, audio, options, args.language)
    out = {"task": "stream", "model": model.name, "dtype": getattr(model, "dtype", "float32"), "policy": args.policy,
           "step_s": args.step, "speed": speed, "encoder": args.encoder, "options": _options_dict(decoder.options),
           "prompt_tokens": getattr(policy, "prompt_tokens", None),
           "forced_prefix": getattr(policy, "forced_prefix", None),
           **out, "fallbacks": decoder.fallbacks, "offline_text": offline,
           "wer_vs_offline": _wer(out["text"], offline)}
    if reference is not None:
        out["reference"] = reference
        out["wer"] = _wer(out["text"], reference)
    if args.json:
        print(json.dumps(out, ensure_ascii=False, indent=1))
        return 0
    print(out["text"])

    def shown(value, spec: str) -> str:  # a figure, or "–" where there is none (no word committed, no text)
        return "–" if value is None else format(value, spec)

    wer = f", WER {shown(out['wer'], '.1%')} vs the reference" if "wer" in out else ""
    say(f"RTF {out['rtf']:.2f}, latency mean {shown(out['latency']['mean_s'], '.2f')} s / "
        f"p90 {shown(out['latency']['p90_s'], '.2f')} s, {out['revised_fraction']:.0%} of tentative tokens revised, "
        f"WER {shown(out['wer_vs_offline'], '.1%')} vs offline{wer}")
    return 0


def summary(events, say=None) -> dict:
    """A streaming run's events -> the JSON fields (``text``, ``commits``, ``trims``,
    ``fell_behind``, ``waited``, timing, ``latency``, revisions); ``say(line)`` gets progress."""
    from core.streaming import Committed, FellBehind, StreamFinished, Trimmed, Waited

    commits, trims, behind, waited, lats, fin = [], [], [], 0, [], None
    for ev in events:
        if isinstance(ev, Committed):
            lats.extend(ev.word_latencies)
            commits.append({"text": ev.text, "audio_s": round(ev.audio_s, 3), "audio_end_s": round(ev.audio_end_s, 3),
                            "wall_s": round(ev.wall_s, 3), "latency_s": round(ev.latency_s, 3)})
            if say:
                say(f"[{ev.audio_s:6.2f} s] {ev.text.strip()}")
        elif isinstance(ev, Trimmed):
            trims.append({"start_s": round(ev.start_s, 3), "reason": ev.reason})
        elif isinstance(ev, FellBehind):
            behind.append({"lag_s": round(ev.lag_s, 3), "skipped_s": ev.skipped_s, "message": ev.message})
            if say:
                say(ev.message)
        elif isinstance(ev, Waited):
            waited += 1
        elif isinstance(ev, StreamFinished):
            fin = ev
    if fin is None:
        raise RuntimeError("the stream ended without finishing")
    lat = np.asarray(lats, dtype=float)
    return {"text": fin.text, "commits": commits, "trims": trims, "fell_behind": behind, "waited": waited,
            "audio_s": round(fin.audio_s, 3), "wall_s": round(fin.wall_s, 3), "decode_s": round(fin.decode_s, 3),
            "rtf": round(fin.rtf, 4),
            "latency": {"mean_s": round(float(lat.mean()), 3) if lat.size else None,
                        "p90_s": round(float(np.percentile(lat, 90)), 3) if lat.size else None, "words": int(lat.size)},
            "tentative_shown": fin.tentative_shown, "revised": fin.revised,
            "revised_fraction": round(fin.revised_fraction, 4), "decodes": fin.decodes}


def offline_text(model, audio: np.ndarray, options, language: str = "auto") -> str:
    """The transcript ``transcribe`` gives for ``audio``: one window up to 30 s, long-form beyond."""
    from dataclasses import replace

    from core.events import Finished

    options = replace(options, capture_attention=False)
    if len(audio) / catalog.SAMPLE_RATE > catalog.WINDOW_S:
        events = model.transcribe(audio, options, language=language)
    else:
        events = model.decode(audio, options, language=language)
    finished = [ev for ev in events if isinstance(ev, Finished)]
    return finished[-1].text.strip() if finished else ""


def _reference(text: str | None) -> str | None:
    if text is None:
        return None
    path = Path(text) if len(text) < 4096 and "\n" not in text else None
    if path is not None and (path.suffix.lower() == ".txt" or path.is_file()):
        if not path.is_file():
            raise CLIError(f"--reference {text}: no such file; give the expected text or a UTF-8 .txt file")
        try:
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError:
            raise CLIError(f"--reference {text} is not UTF-8 text; save it as UTF-8 (.txt)") from None
    if not text.strip():
        raise CLIError("--reference is empty; give the expected transcript or a .txt file holding it")
    return text.strip()


def _wer(hypothesis: str, reference: str) -> float | None:
    from core.analysis.metrics import score

    try:
        return round(score("wer", hypothesis, reference).value, 4)
    except ValueError:  # an empty reference (the offline transcript of silence)
        return None


def _options_dict(options) -> dict:
    from dataclasses import asdict

    return {k: v for k, v in asdict(options).items() if isinstance(v, (int, float, str, bool, type(None)))}
