"""What a decode run reports: the JSON trace (``--json``, on stdout) and the notes of a
fixed-window speech run (on stderr).

Shared by the subcommands (``core.cli.commands``), long-form transcription
(``core.cli.longform``) and word timing (``core.cli.words``), which import this module and
never each other in a circle.
"""

from __future__ import annotations

import hashlib
import os
import sys
from typing import Iterable, Sequence

from core.analysis.beam_tree import BeamTree
from core.analysis.lens import lens_json
import dataclasses

from core.events import BeamEvent, Event, Finished, SegmentEvent, SpeculationRound, StepEvent
from core.options import DecodingOptions
from core.processors.stages import run_reports


class CLIError(Exception):
    """An error to report as one line, exit status 1."""


def vocab_size_of(model) -> int | None:
    """A task model's vocabulary size (its backend's), None if it has none."""
    return getattr(getattr(model, "backend", None), "vocab_size", None)


def stage_reports(options: DecodingOptions, token_ids: list[int], vocab_size: int | None, err=None) -> dict:
    """What the stages that shaped a run of ``token_ids`` report about it (``run_reports``: the
    watermark's detector z-score), ``{stage name: data}`` for the JSON trace; each note is
    printed on ``err`` (stderr)."""
    reports = run_reports(options, token_ids, vocab_size)
    for _data, note in reports.values():
        print(note, file=err or sys.stderr)
    return {name: data for name, (data, _note) in reports.items()}


def trace(task: str, model: str, options: DecodingOptions, events: Iterable[Event], attention: str | None,
          vocab_size: int | None = None, dtype: str = "float32") -> dict:
    """Consume ``events`` into the JSON trace dict (tokens in decoding order, no prompt);
    with ``vocab_size``, the stages' run reports are added (``stage_reports``); ``dtype``: the
    model's compute type ("float32", or "int8" for ``--dtype int8``), written as ``"dtype"``."""
    tokens: list[dict] = []
    finished: Finished | None = None
    tree = BeamTree()
    rounds: list[dict] = []
    speculative = options.strategy == "speculative"
    language_probs: dict[str, float] | None = None
    for ev in events:
        if isinstance(ev, SegmentEvent) and language_probs is None and ev.language_probs:
            language_probs = {code: round(p, 6) for code, p in ev.language_probs}  # the first window's
        if isinstance(ev, StepEvent):
            tok = {
                "id": ev.token_id,
                "text": ev.text,
                "prob": round(ev.prob, 6),
                "raw_prob": round(ev.raw_prob, 6),
                "entropy": round(ev.entropy, 6),
                "segment": ev.segment,
                "rank": ev.rank,
                "topk": [{"id": t.id, "text": t.text, "prob": round(t.prob, 6)} for t in ev.topk],
                "stages": [_stage_json(ev, s) for s in ev.stages],
            }
            if ev.mu is not None:
                tok["mu"] = round(ev.mu, 6)
            if ev.forced:
                tok["forced"] = True
            if speculative:
                tok["drafted"], tok["accepted"] = ev.drafted, ev.accepted
                if ev.speculation:
                    tok["speculation"], tok["round"] = ev.speculation, ev.spec_round
            if ev.lens:
                tok["lens"] = lens_json(ev.lens)
            if attention and ev.cross_attention is not None:
                a = ev.cross_attention
                tok["cross_attention"] = (a.mean(axis=(0, 1)) if attention == "mean" else a).round(5).tolist()
            tokens.append(tok)
        elif isinstance(ev, BeamEvent):
            tree.add(ev)
        elif isinstance(ev, SpeculationRound):
            rounds.append(round_json(ev))
        elif isinstance(ev, Finished):
            finished = ev
    if finished is None:
        raise CLIError("decoding ended without a result")
    out = {
        "task": task,
        "model": model,
        "dtype": dtype,
        "options": options.to_dict(),
        "text": finished.text,
        "tokens": tokens,
        "timing": finished.stats.to_dict(),
        "cancelled": finished.cancelled,
        "reason": finished.reason,
        "rerun": rerun_block(task, model, options, dtype),
    }
    if len(tree):
        out["beam_tree"] = tree.to_dict()
    if language_probs:
        out["language_probs"] = language_probs
    if speculative:
        out["speculative"] = speculative_json(finished, rounds)
    out.update(stage_reports(options, finished.token_ids, vocab_size))
    return out


#: the command line ``core.cli.commands.main`` was last given and its parsed arguments
#: (``note_command``), for the trace's ``"rerun"`` block; None outside the CLI (the window)
_COMMAND: tuple[list[str], object] | None = None

#: per command, the argument that names its input file (translate TEXT has none: the text is in argv)
INPUT_ARGUMENTS = {"transcribe": "file", "stream": "file", "ocr": "image", "translate": "input_file"}


def note_command(argv: Sequence[str], args) -> None:
    """Remember the command line (``argv``, without the program name) and its parsed
    ``args`` (argparse.Namespace) of the command now running, for ``rerun_block``."""
    global _COMMAND
    _COMMAND = (list(argv), args)


def file_sha256(path) -> str:
    """The SHA-256 of a file's bytes, as 64 hex digits (read in 1 MiB chunks). OSError if unreadable."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def environment() -> dict:
    """What the numbers of a run depend on besides its input and options: ``{"torch",
    "transformers", "threads" (torch.get_num_threads()), "app_version"}``."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    import torch

    def installed(name: str) -> str | None:
        try:
            return dist_version(name)
        except PackageNotFoundError:
            return None

    return {"torch": torch.__version__, "transformers": installed("transformers"),
            "threads": torch.get_num_threads(), "app_version": installed("decoding-explorer") or "unknown"}


def rerun_block(task: str, model: str, options: DecodingOptions, dtype: str = "float32") -> dict:
    """The trace's ``"rerun"`` block: what ``decoding-explorer replay`` needs to rerun the run
    and get the same ids (``core.cli.replay``)::

        {"torch", "transformers", "threads", "app_version",  # environment()
         "device": "cpu" | "cuda" | "mps" (--device, resolved), "dtype", "seed", "task", "model",
         "argv": [...] | null,     # the command line (without the program name); null outside the CLI
         "cwd": "/dir" | null,     # where it ran (relative paths in argv are relative to it)
         "input": {"path", "sha256"} | {"text_sha256"} | null}

    The full decoding options are the trace's ``"options"``. ``argv`` and ``input`` come from
    the command ``note_command`` saw, when it ran this ``task``."""
    out = environment() | {"device": "cpu", "dtype": dtype, "seed": options.seed, "task": task, "model": model,
                           "argv": None, "cwd": None, "input": None}
    if _COMMAND is None or getattr(_COMMAND[1], "command", None) != task:
        return out
    argv, args = _COMMAND
    out["argv"], out["cwd"] = argv, os.getcwd()
    if isinstance(getattr(args, "device", None), str):  # --device: the device it ran on (cpu but for transcribe)
        from core.devices import run_device

        out["device"] = run_device(task, args.device, getattr(args, "dtype", dtype))
    name = getattr(args, INPUT_ARGUMENTS.get(task, ""), None)
    if name is not None:
        path = os.path.abspath(name)
        out["input"] = {"path": path, "sha256": file_sha256(path) if os.path.isfile(path) else None}
    elif isinstance(getattr(args, "text", None), str):
        out["input"] = {"text_sha256": hashlib.sha256(args.text.encode("utf-8")).hexdigest()}
    return out


def round_json(r: SpeculationRound) -> dict:
    """One speculation round for the JSON trace (``SpeculationRound``'s fields; the drafted
    tokens and the residual top-k as dicts, probabilities rounded)."""
    out = dataclasses.asdict(r)
    out["drafted"] = [{k: (round(v, 6) if isinstance(v, float) else v) for k, v in d.items()} for d in out["drafted"]]
    out["residual_topk"] = [{"id": t.id, "text": t.text, "prob": round(t.prob, 6)} for t in r.residual_topk]
    out["draft_ms"], out["target_ms"] = round(r.draft_ms, 3), round(r.target_ms, 3)
    return out


def speculative_json(finished: Finished, rounds: list[dict]) -> dict:
    """The trace's ``"speculative"`` block: ``SpeculationSummary.to_dict()`` (its round count
    as ``"target_calls"``: rounds without a draft included) and ``"rounds"``, the drafted
    rounds in order (``round_json``)."""
    summary = finished.stats.speculative
    out = summary.to_dict() if summary is not None else {}
    out["target_calls"] = out.pop("rounds", 0)
    out["rounds"] = rounds
    return out


def speculative_line(summary) -> str | None:
    """The one stderr line text mode prints after a speculative run (None without one)::

        speculative: α 0.61 (accepted/judged), 1.4 tokens per target call, draft ngram[, switched off: REASON]

    α is ``SpeculationSummary.judged_acceptance_rate``: of the drafted tokens the target
    judged (the accepted ones and each round's first rejection), the share it kept."""
    if summary is None:
        return None
    line = (f"speculative: α {summary.judged_acceptance_rate:.2f} (accepted/judged), "
            f"{summary.tokens_per_target_call:.1f} tokens per target call, draft {summary.draft}")
    if summary.switched_off:
        line += f", switched off: {summary.switched_off}"
    return line


def say_speculative(summary, err=None) -> None:
    """Print ``speculative_line(summary)`` on ``err`` (stderr), when there is one."""
    line = speculative_line(summary)
    if line is not None:
        print(line, file=err or sys.stderr, flush=True)


def speech_notes(model, events, audio=None):
    """Pass a fixed-window run's events through, printing on stderr what the user should know:
    each window's warning as it starts (skipped as silence, or a high no-speech probability),
    then at the end the windows that loop (``core.tasks.speech.window_warnings``) and what was
    skipped as silence (``core.tasks.longform_verdicts.silence_note``; ``audio``: the run's samples, for
    the skipped windows' levels)."""
    from core.tasks.longform_verdicts import loudest_db, silence_note
    from core.tasks.speech import SKIPPED, window_warnings

    seen, skipped = [], []
    for ev in events:
        if isinstance(ev, (SegmentEvent, StepEvent)):
            seen.append(ev)
        if isinstance(ev, SegmentEvent) and ev.warning:
            print(f"warning: {ev.warning}", file=sys.stderr, flush=True)
        if isinstance(ev, SegmentEvent) and ev.label.endswith(SKIPPED):
            level = float("-inf") if audio is None else loudest_db(audio[ev.segment * 480_000:(ev.segment + 1) * 480_000])
            skipped.append((ev.no_speech_prob, level))
        if isinstance(ev, Finished):
            for line in window_warnings(seen, model.backend.decode):
                print(f"warning: {line}", file=sys.stderr, flush=True)
            if skipped:
                print(silence_note(skipped), file=sys.stderr, flush=True)
        yield ev


def _stage_json(ev, s) -> dict:
    """One stage of a token's chain in the JSON trace: name, kept, mass; contrastive decoding
    adds ``note`` (which amateur: "amateur layer 3 of 6 (auto, JS 0.0123)") and, when the
    token is among the stage's candidates, ``amateur_prob`` (the amateur's probability of it)."""
    out = {"name": s.name, "kept": s.kept, "mass": round(s.mass, 6)}
    if s.note:
        out["note"] = s.note
    if s.amateur is not None:
        rows = [i for i, c in enumerate(ev.stage_candidates) if c.id == ev.token_id]
        if rows and rows[0] < len(s.amateur):
            out["amateur_prob"] = float(f"{float(s.amateur[rows[0]]):.6g}")
    return out
