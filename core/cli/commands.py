"""Headless commands of ``decoding-explorer`` (the console script is ``gui.app:main``, which
opens the window when no command is given and hands the commands below to :func:`main`).

    decoding-explorer transcribe FILE [--model tiny.en|base|ID_OR_DIR] [--dtype float32|int8|float16|bfloat16 [--precision-flips]] [--prefix TEXT] [--timestamps]
                                      [--strategy ...] [--no-kv-cache] [--json]
    decoding-explorer translate TEXT [--direction en-pt|pt-en|MODEL_ID_OR_DIR] [--input-file F]
                                     [--shortlist] [--target-language CODE] [--source-prefix TEXT]
                                     [--prefix TEXT] [--strategy ...] [--json]
    decoding-explorer ocr IMAGE [--model bundled|ID_OR_DIR] [--region X,Y,W,H] [--prefix TEXT] [--strategy ...]
                                [--json]

``transcribe`` decodes long-form as openai/whisper ``transcribe()`` when the audio is longer
than 30 s or ``--output-format`` is given (``--windows auto``; ``long-form`` / ``fixed`` force
one): seek by timestamps, previous-text conditioning, temperature fallback, silence skipped;
``[start --> end] text`` per segment, ``-f txt|vtt|srt|tsv|json|all -o DIR`` writes files, and
``--json`` adds ``"language"``, ``"segments"`` and ``"attempts"`` (``core.cli.longform``).

``--compare SPEC ...`` decodes 2-4 lanes side by side on one encoder pass per segment and
prints each lane's text, log-probability, time and, with ``--reference TEXT`` /
``--reference-file F``, its WER / CER / chrF (``core.cli.lanes``; ``--json`` gives
``"lanes": [...]`` and ``"agreement"``).

``--dtype int8`` (transcribe) runs Whisper's linear layers in int8 (``core.backends.int8``: per-row
int8 weights, activations quantised per call, as CTranslate2's int8); the trace says ``"dtype"``
and stderr names it. ``--no-kv-cache`` (every command) re-runs the decoder over the whole prefix
at every step: the same ids, each step slower than the last (not with speculative decoding).

``--prefix TEXT`` forces the text's tokens after the task prompt and lets the strategy
continue (openai/whisper's ``prefix``; for translation a target prefix), in the first
segment (window, sentence, line) only, as openai/whisper applies its prefix to the first
window.

Prints the text, or with ``--json`` a trace::

    {"task", "model", "options", "text",
     "tokens": [{"id", "text", "prob", "raw_prob", "entropy", "rank", "segment",
                 "topk": [{"id", "text", "prob"}],
                 "stages": [{"name", "kept", "mass"}],      # the sampler chain, in order
                 "mu"?,                                      # mirostat only
                 "forced"?,                                  # true for tokens forced by --prefix
                 "lens"?: [{"layer", "id", "text", "prob",   # --logit-lens: per decoder layer, its top token
                            "logprob"}]}],                   #   and the emitted token's log p (null if -inf)
     "timing": {"load_s", "encode_s", "decode_s", "tokens_per_s", "rtf"},
     "dtype": "float32" | "int8" | "float16" | "bfloat16", # the model's compute type (--dtype)
     "precision_flips"?: [{"step", "token", "float32_token", # --precision-flips: steps where float32's argmax
                           "margin"}],                     #   differs (core.precision; margin in nats)
     "beam_tree"?: {"nodes": [{"id", "parent", "step", "token", "text", "logprob", "score",
                               "normalized", "status", "best", "eos", "row", "group", "segment"}]}}

(``"beam_tree"`` for beam and diverse beam search: every candidate considered, see
``core.analysis.beam_tree.BeamTree.to_dict``; one node per segment is ``best`` and the non-EOS
tokens on the path to it are the segment's output.)

(``"language_probs": {"en": 0.97, ...}`` for a multilingual Whisper: the first window's
language distribution at <|startoftranscript|>, its top 10, over ``--language-candidates``
when given.)

(``"words": [{"word", "start", "end", "prob"}]`` with ``transcribe --word-timestamps``:
seconds from the start of the audio, prob = the mean probability of the word's tokens;
``core.cli.words``.)

(``"cross_attention"`` per token with ``--attention``: layers x heads x source_len,
averaged over heads and layers unless ``--attention full``. ``"lens"`` per token with
``--logit-lens``: one entry per decoder layer, the last being the output layer, whose
top token and probability are the raw distribution's top-1 and whose ``"logprob"`` is
log ``"raw_prob"``; see ``core.events.LensEntry``.) Bad input: one line
on stderr and exit status 2 (usage) or 1 (input/model errors).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from typing import Iterable, Sequence

from core import catalog
from core.cli import ocr as cli_ocr
from core.cli import stream as cli_stream
from core.cli import replay as cli_replay
from core.cli import sweep as cli_sweep
from core.events import Event, Finished
from core.cli import translate as cli_translate
from core.cli.lanes import add_compare_arguments, lanes_from_args, run_compare
from core.cli.longform import add_longform_arguments, check_writer_options, longform_options, run_longform, use_longform
from core.cli.options import add_decoding_arguments, dtype_of, misapplied_flag, options_from_args, say_dtype
from core.cli.trace import CLIError, say_speculative, speech_notes, stage_reports, trace, vocab_size_of
from core.cli.words import add_word_arguments, emit_words
from core.options import DecodingOptions


def cmd_transcribe(args: argparse.Namespace) -> int:
    from core.inputs.audio import AudioError, load_audio
    from core.tasks.speech import SpeechModel

    options = options_from_args(args)
    lanes = lanes_from_args(args, options)
    try:
        audio = load_audio(args.file)
    except AudioError as e:
        raise CLIError(str(e)) from None
    longform = use_longform(args, len(audio) / catalog.SAMPLE_RATE)
    if longform:
        if lanes:
            raise CLIError("--compare decodes plain 30 s windows; add --windows fixed (long-form is not compared yet)")
        if args.timestamps:
            raise CLIError("long-form decoding always uses timestamps; --timestamps is for --windows fixed")
        longform_options(args)  # a bad threshold fails before the model loads
        check_writer_options(args)
    elif args.output_format:
        raise CLIError("--output-format needs long-form decoding; drop --windows fixed")
    if longform and _drafts_from_a_branch(options):
        raise CLIError("--draft branch drafts from an earlier run of the same input, and long-form decoding has "
                       "none for its first attempts; give --draft ngram (a failed attempt of the temperature "
                       "fallback drafts the next attempt whatever --draft says)")
    flips = getattr(args, "precision_flips", False)
    if flips and (longform or lanes or args.timestamps or args.word_timestamps):
        raise CLIError("--precision-flips reads one plain window (<= 30 s); drop --timestamps / --compare / "
                       "--word-timestamps, or --precision-flips")
    device = _device(args)
    if flips or device != "cpu":  # flips: the float32 model is kept beside the half one (load_whisper)
        from core.backends.whisper_models import load_whisper

        loaded = load_whisper(args.model, dtype=args.dtype, keep_float32=flips, device=device)
        model = SpeechModel(loaded)
        if flips:
            reference = SpeechModel(dataclasses.replace(loaded, model=loaded.float32_model, dtype="float32",
                                                        float32_model=None))
    else:
        model = SpeechModel.load(args.model, **({"dtype": args.dtype} if args.dtype != "float32" else {}))
    say_dtype(model)
    prefix = _prefix_ids(model, args.prefix)
    if longform:
        return run_longform(model, audio, options, prefix, args)
    for run_options in lanes or [options]:
        _decode_plainly_first(run_options, lambda o: model.decode(
            audio, o, language=args.language, task=args.task, prefix_ids=prefix, timestamps=args.timestamps,
            candidate_languages=args.language_candidates))
    if args.word_timestamps:
        return emit_words(model, audio, options, prefix, args)
    if lanes:
        return run_compare("transcribe", model.name, options, lanes, args, lambda ls: model.decode_lanes(
            audio, ls, language=args.language, task=args.task, prefix_ids=prefix, timestamps=args.timestamps,
            candidate_languages=args.language_candidates))
    events = speech_notes(model, model.decode(audio, options, language=args.language, task=args.task,
                                              prefix_ids=prefix, timestamps=args.timestamps,
                                              candidate_languages=args.language_candidates), audio)
    if flips:
        return _emit_with_flips(model, reference, audio, options, list(events), args)
    if not args.timestamps:
        return _emit("transcribe", model.name, options, events, args, vocab_size_of(model), dtype_of(model))
    events = list(events)
    segments = model.segments(events)
    if args.json:
        out = trace("transcribe", model.name, options, events, args.attention, vocab_size_of(model), dtype_of(model))
        out["segments"] = segments
        print(json.dumps(out, ensure_ascii=False, indent=1))
    else:  # as openai/whisper's CLI prints them
        for s in segments:
            print(f"[{s['start']:.2f} --> {s['end']:.2f}] {s['text']}")
        finished = next((ev for ev in events if isinstance(ev, Finished)), None)
        if finished is not None:
            say_speculative(finished.stats.speculative)
    return 0


def read_text_file(path: str) -> str:
    """The UTF-8 text of ``path`` (a .txt file); CLIError saying what is wrong otherwise."""
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise CLIError(f"{path}: no such file; give a UTF-8 .txt file")
    try:
        return p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise CLIError(f"{path} is not UTF-8 text; save it as UTF-8 (.txt)") from None


def cmd_translate(args: argparse.Namespace) -> int:
    from core.tasks.translation import TranslationModel

    if (args.text is None) == (args.input_file is None):
        raise CLIError("give the text to translate either as TEXT or with --input-file F (one of them)")
    text = read_text_file(args.input_file) if args.input_file is not None else args.text
    if not text.strip():
        raise CLIError("the text is empty (or only white space); give something to translate")
    options = options_from_args(args)
    lanes = lanes_from_args(args, options)
    model = TranslationModel.load(args.direction, target_language=args.target_language, prefix=args.source_prefix,
                                  source_language=args.source_language, dtype=args.dtype)
    say_dtype(model)
    prefix = _prefix_ids(model, args.prefix)
    cli_translate.warn_notes(model, text)  # unreadable scripts, cut sentences: on stderr
    for run_options in lanes or [options]:
        _decode_plainly_first(run_options, lambda o: model.decode(text, o, shortlist=args.shortlist,
                                                                  prefix_ids=prefix))
    if lanes:
        name = model.name + (" (shortlist)" if args.shortlist else "")
        return run_compare("translate", name, options, lanes, args, lambda ls: model.decode_lanes(
            text, ls, shortlist=args.shortlist, prefix_ids=prefix))
    if not args.json:  # each sentence printed as it is done
        return cli_translate.stream_translation(model, text, options, prefix, shortlist=args.shortlist,
                                                progress=cli_translate.wants_progress(args))
    events = model.decode(text, options, shortlist=args.shortlist, prefix_ids=prefix)
    if cli_translate.wants_progress(args):
        events = cli_translate.said_segments(events)
    name = model.name + (" (shortlist)" if args.shortlist else "")
    return _emit("translate", name, options, events, args, vocab_size_of(model), dtype_of(model))


def parse_region(text: str | None) -> tuple[int, int, int, int] | None:
    """``"X,Y,W,H"`` (pixels) -> a tuple; CLIError on anything else."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    try:
        x, y, w, h = (int(p) for p in parts)
    except ValueError:
        raise CLIError(f"--region must be X,Y,W,H in whole pixels (e.g. 10,20,300,40), got {text!r}") from None
    if w <= 0 or h <= 0:
        raise CLIError(f"--region width and height must be > 0, got {w}x{h}")
    return x, y, w, h


def cmd_ocr(args: argparse.Namespace) -> int:
    from core.tasks.ocr import OCRModel, load_image

    options = options_from_args(args)
    lanes = lanes_from_args(args, options)
    region = parse_region(args.region)
    say = cli_ocr.reporter(args)
    say(f"opening {args.image}")
    image = load_image(args.image)  # ValueError with the user message on bad files
    cli_ocr.note_size(image, args.image)
    model = OCRModel.load(args.model, progress=say)
    prefix = _prefix_ids(model, args.prefix)
    lines = cli_ocr.detect_lines(model, image, region, say)
    for run_options in lanes or [options]:
        _decode_plainly_first(run_options, lambda o: model.decode(image, o, lines=lines, region=region,
                                                                  prefix_ids=prefix))
    if lanes:
        return run_compare("ocr", model.name, options, lanes, args, lambda ls: model.decode_lanes(
            image, ls, lines=lines, region=region, prefix_ids=prefix))
    events = cli_ocr.said_lines(model.decode(image, options, lines=lines, region=region, prefix_ids=prefix), say)
    if not args.json:
        return _emit("ocr", model.name, options, events, args, vocab_size_of(model))
    out = trace("ocr", model.name, options, events, args.attention, vocab_size_of(model))
    texts = out["text"].split("\n")
    out["lines"] = [
        {"box": list(line.box), "text": texts[i] if i < len(texts) else "",
         "ctc_text": model.ctc_reading(image, line) if model.has_ctc else None, "n_columns": line.n_columns}
        for i, line in enumerate(lines)
    ]
    out["image_size"] = list(image.size)
    if "downscaled_from" in image.info:
        out["downscaled_from"] = list(image.info["downscaled_from"])
    out["timing"]["detect_s"] = model.last_detect_s
    print(json.dumps(out, ensure_ascii=False, indent=1))
    return 0


def _drafts_from_a_branch(options: DecodingOptions) -> bool:
    return options.strategy == "speculative" and options.draft == "branch"


def _decode_plainly_first(options: DecodingOptions, decode) -> None:
    """``--draft branch`` (or a ``speculative:branch`` lane) drafts from an earlier run on the
    same input, and a single CLI run has none: decode once plainly first (``--strategy`` = the verification, every other option
    the same; ``decode(options)`` gives its events, consumed here), saying so on stderr. Its
    tokens then draft the speculative run (the task keeps the encoder output and the run).
    Nothing for other strategies and drafts."""
    if not _drafts_from_a_branch(options):
        return
    from dataclasses import replace

    print(f"speculative: --draft branch drafts from an earlier run of the same input; decoding once plainly first "
          f"(--strategy {options.verification}), whose tokens draft the speculative run", file=sys.stderr)
    for _ in decode(replace(options, strategy=options.verification)):
        pass


def _prefix_ids(model, text: str | None) -> list[int]:
    """The token ids ``--prefix TEXT`` forces (the task model's ``prefix_ids``); CLIError
    when the text gives none."""
    if text is None:
        return []
    ids = model.prefix_ids(text)
    if not ids:
        raise CLIError(f"--prefix {text!r} gives no token {model.name} can write; give text in its alphabet")
    return ids


def _device(args) -> str:
    """The torch device of ``--device`` (auto: cuda when available, else cpu; int8 stays on the CPU)."""
    from core.devices import DeviceError, run_device

    try:
        return run_device("transcribe", getattr(args, "device", "auto"), args.dtype)
    except DeviceError as e:
        raise CLIError(str(e)) from None


def _emit_with_flips(model, reference, audio, options: DecodingOptions, events: list, args) -> int:
    """Emit a half-precision transcription with its precision flips (``core.precision``): the
    JSON trace gets ``precision_flips`` [{step, token, float32_token, margin}]; a line on stderr."""
    from core.precision import flips_line, speech_flips

    finished = next(ev for ev in events if isinstance(ev, Finished))
    found = speech_flips(model, reference, audio, finished, language=args.language, task=args.task)
    steps = len(finished.token_ids) + (finished.reason == "eos")
    print(flips_line(model.name, dtype_of(model), found, steps), file=sys.stderr)
    if args.json:
        out = trace("transcribe", model.name, options, events, args.attention, vocab_size_of(model), dtype_of(model))
        out["precision_flips"] = [f.to_dict() for f in found]
        print(json.dumps(out, ensure_ascii=False, indent=1))
        return 0
    return _emit("transcribe", model.name, options, events, args, vocab_size_of(model), dtype_of(model))


def _emit(task: str, model_name: str, options: DecodingOptions, events: Iterable[Event], args,
          vocab_size: int | None = None, dtype: str = "float32") -> int:
    if args.json:
        print(json.dumps(trace(task, model_name, options, events, args.attention, vocab_size, dtype),
                         ensure_ascii=False, indent=1))
        return 0
    finished = None
    for ev in events:
        if isinstance(ev, Finished):
            finished = ev
    print(finished.text if finished is not None else None)
    if finished is not None:
        stage_reports(options, finished.token_ids, vocab_size)  # notes on stderr (the watermark's z-score)
        say_speculative(finished.stats.speculative)  # speculative decoding: α, tokens per target call
    return 0


def version() -> str:
    """The installed package's version ("unknown" when run from a tree that is not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("decoding-explorer")
    except PackageNotFoundError:
        return "unknown"


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line usage error: the option list is too long to print on
    every typo, so the line says where the help is."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _decoding_subcommand(parser: argparse.ArgumentParser, task: str, func, *more) -> None:
    """The flags every decoding subcommand shares (the decoding options, ``--compare``), then
    ``more`` (functions adding the subcommand's own groups), and the ``cmd_*`` it runs."""
    add_decoding_arguments(parser)
    add_compare_arguments(parser, task)
    for add in more:
        add(parser)
    parser.set_defaults(func=func)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="decoding-explorer",
        description="Watch encoder-decoder models decode. With no command, decoding-explorer opens the window.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = p.add_subparsers(dest="command")
    t = sub.add_parser("transcribe", help="speech to text with Whisper")
    t.add_argument("file", help="audio file: wav, flac, ogg, mp3")
    t.add_argument("--model", default=catalog.WHISPER_DEFAULT,
                   help=f"{' | '.join(catalog.WHISPER_BUNDLED)} (bundled) | a transformers model id or directory")
    t.add_argument("--language", default="auto", help="auto | en | de | ...")
    t.add_argument("--task", default=catalog.WHISPER_TASKS[0], choices=catalog.WHISPER_TASKS)
    t.add_argument("--language-candidates", default=None, metavar="CODES",
                   help="detect the language among these only, e.g. en,de,fr (softmax over their language tokens; "
                        "English-only models ignore it); --json gives \"language_probs\" of the first window")
    t.add_argument("--prefix", default=None, metavar="TEXT",
                   help="force these words at the start of the transcript (first 30 s window), then continue "
                        "(openai/whisper's prefix)")
    t.add_argument("--timestamps", action="store_true",
                   help="decode with Whisper's timestamp tokens; --json gains \"segments\": [{start, end, text}] "
                        "(seconds)")
    _decoding_subcommand(t, "transcribe", cmd_transcribe, add_word_arguments, add_longform_arguments)
    tr = sub.add_parser("translate", help="translate text (bundled Bergamot en<->pt, or a transformers model)")
    tr.add_argument("text", nargs="?", help="the text to translate (or use --input-file)")
    tr.add_argument("--input-file", metavar="F", help="a UTF-8 .txt file to translate instead of TEXT")
    tr.add_argument("--direction", default=catalog.TRANSLATION_DEFAULT,
                    help=f"{' | '.join(catalog.TRANSLATION_BUNDLED)} (bundled) | a transformers model id or local "
                         "directory (MarianMT, T5, M2M100, NLLB)")
    tr.add_argument("--shortlist", action="store_true",
                    help="bundled models: restrict each step to the lexical shortlist (faster; probabilities "
                         "renormalised over a few hundred candidates)")
    tr.add_argument("--target-language", default=None, help="M2M100/NLLB: target language code (pt, por_Latn, ...)")
    tr.add_argument("--source-language", default=None, help="M2M100/NLLB: source language code")
    tr.add_argument("--source-prefix", default=None, metavar="TEXT",
                    help="T5: text put before every source sentence (default 'translate English to German: ')")
    tr.add_argument("--prefix", default=None, metavar="TEXT",
                    help="force this start of the translation (target prefix, first sentence), then continue")
    _decoding_subcommand(tr, "translate", cmd_translate, cli_translate.add_progress_argument)
    o = sub.add_parser("ocr", help="read the text in an image (CRAFT lines + bundled reader or TrOCR)")
    o.add_argument("image", help="image file: PNG, JPEG, WebP, BMP, TIFF")
    o.add_argument("--model", default=catalog.OCR_DEFAULT,
                   help="bundled (english_g2 + attention decoder) | a transformers TrOCR model id or directory")
    o.add_argument("--region", default=None, metavar="X,Y,W,H", help="read only this part of the image (pixels)")
    o.add_argument("--prefix", default=None, metavar="TEXT",
                   help="force this start of the first line's reading, then continue")
    _decoding_subcommand(o, "ocr", cmd_ocr, cli_ocr.add_progress_argument)
    cli_stream.add_parser(sub)  # stream FILE: a file played as live input (core.cli.stream)
    cli_replay.add_parser(sub, main)  # replay TRACE.json: rerun a --json trace, compare ids (core.cli.replay)
    cli_sweep.add_parser(sub)  # sweep TASK DATA: strategies over a data set, on Ray (core.cli.sweep)
    return p


#: options whose value may start with "-" and a digit (argparse takes "-10,-10,50,50" for an option)
NEGATIVE_VALUE_OPTIONS = ("--region",)


def _attach_negative_values(argv: list[str]) -> list[str]:
    """``--region -10,-10,500,500`` as ``--region=-10,-10,500,500``: argparse reads a value that
    starts with "-" as the next option ("expected one argument"); a region partly left of or
    above the image is valid (it is clipped)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in NEGATIVE_VALUE_OPTIONS and i + 1 < len(argv) and re.match(r"-\d", argv[i + 1]):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point. Returns the exit status."""
    argv = _attach_negative_values(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    cli_replay.note_command(argv, args)  # the trace's "rerun" block records the command line
    problem = misapplied_flag(args)
    if problem is not None:
        parser.exit(2, f"{parser.prog} {args.command}: error: {problem} (see {parser.prog} {args.command} --help)\n")
    try:
        return args.func(args)
    except (CLIError, ValueError, FileNotFoundError, RuntimeError, OSError) as e:
        print(f"decoding-explorer: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
