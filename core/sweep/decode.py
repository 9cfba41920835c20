"""One input, every strategy of a sweep: one encoder pass per segment for all of them (the
task model's ``decode_lanes``), then one row and one JSON trace per strategy x seed.

:class:`FileDecoder` loads the model once (a Ray actor holds one; tests use it directly) and
:meth:`FileDecoder.decode` turns one :class:`~core.sweep.data.Item` into
:class:`Decoded` results. Each lane's events equal that strategy decoded alone (the lanes
share the encoder output and nothing else), so a row's ids and metric are those of the
per-file CLI run ``decoding-explorer transcribe FILE --strategy ...``.

Row fields (``ROW_FIELDS``; the columns of ``results.parquet``):

- ``file`` (the item's id: path relative to DATA), ``spec`` (as written), ``seed``,
  ``strategy`` (the options described: ``beam:5``), ``input_hash``, ``options_hash``;
- ``metric`` ("wer" | "cer" | "chrf"), ``value`` (WER/CER a fraction, chrF 0..100; null
  without a reference or with an empty one), ``reference``, ``text``, ``token_ids``;
- ``logprob`` / ``raw_logprob`` (sum of the tokens' log-probabilities under the lane's own /
  the raw distribution; null for -inf), ``tokens``, ``reason`` (eos | max_tokens);
- ``decode_s`` (this strategy's own decoding seconds), ``encode_s`` (the file's one encoder
  pass, shared by its strategies), ``audio_s`` and ``rtf`` = (encode_s + decode_s) / audio_s
  (speech; null otherwise), ``segments`` (windows, sentences, lines);
- hallucination signals: ``skipped`` (windows skipped as digital silence, as the single run
  skips them: no-speech probability > 0.6 and the loudest 20 ms below -50 dBFS; no tokens),
  ``no_speech`` (windows whose no-speech probability is above 0.6,
  long-form's ``no_speech_threshold``), ``fallbacks`` (windows openai/whisper's temperature
  fallback would redo: compression ratio > 2.4 or average log-probability < -1, speech
  only), ``repetitions`` (segments whose text loops: ``window_warnings``' compression-ratio
  and token-entropy tests), ``silent_reference`` (the reference is empty: the input holds
  no speech / text; any output on it is invented);
- ``trace``: the gzipped JSON trace's path relative to the out folder (the ``--json`` trace
  of the run, plus ``"sweep"``: file, spec, seed, metric, value, reference, hashes; its
  ``"rerun"`` block holds the single-run command line, so ``gunzip -k`` then
  ``decoding-explorer replay`` reruns the file alone and checks the ids); ``worker``.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import socket
from dataclasses import dataclass, field
from typing import Any

from core.sweep.data import Item
from core.sweep.specs import Run

#: the columns of results.parquet, in order (module docstring)
ROW_FIELDS = ("file", "spec", "seed", "strategy", "metric", "value", "logprob", "raw_logprob", "tokens",
              "decode_s", "encode_s", "audio_s", "rtf", "segments", "skipped", "no_speech", "fallbacks", "repetitions",
              "silent_reference", "reason", "text", "reference", "token_ids", "input_hash", "options_hash",
              "trace", "worker")

#: openai/whisper's fallback thresholds (core.tasks.longform.LongFormOptions' defaults)
COMPRESSION_RATIO_THRESHOLD, LOGPROB_THRESHOLD, NO_SPEECH_THRESHOLD = 2.4, -1.0, 0.6


@dataclass
class Decoded:
    """One row of results and its trace (None when the file failed: ``error`` says why).

    Attributes:
        row: the row (``ROW_FIELDS``), or for a failure ``{"file", "spec", "seed",
            "input_hash", "options_hash", "error"}``.
        trace: the JSON trace, gzipped (bytes), None for a failure.
        error: one line, None when decoded.
    """

    row: dict
    trace: bytes | None = None
    error: str | None = None


@dataclass
class Settings:
    """What besides the strategy decides a run (part of the options hash).

    Attributes:
        model: the task's model (transcribe: tiny.en | base | ID; translate: en-pt | ID; ocr: bundled | ID).
        language, whisper_task: transcribe's ``--language`` and ``--task``.
        dtype: ``--dtype`` (float32 | int8; int8 for the tasks of ``core.dtypes.INT8_TASKS``:
            transcribe, translate): the workers load the model in it.
        shortlist, target_language, source_language, source_prefix: translate's flags.
    """

    model: str
    language: str = "auto"
    whisper_task: str = "transcribe"
    dtype: str = "float32"
    shortlist: bool = False
    target_language: str | None = None
    source_language: str | None = None
    source_prefix: str | None = None
    extra: dict = field(default_factory=dict)

    def for_hash(self, task: str) -> dict:
        """The settings that apply to ``task``, for the options hash."""
        if task == "transcribe":
            return {"language": self.language, "task": self.whisper_task, "dtype": self.dtype}
        if task == "translate":
            out = {"shortlist": self.shortlist, "target_language": self.target_language,
                   "source_language": self.source_language, "source_prefix": self.source_prefix}
            if self.dtype != "float32":  # float32 sweeps keep the hashes they had (resumable)
                out["dtype"] = self.dtype
            return out
        return {}


def trace_name(input_hash: str, options_hash: str) -> str:
    """The path of a row's trace relative to the out folder."""
    return f"traces/{input_hash[:16]}/{options_hash[:16]}.json.gz"


class FileDecoder:
    """A task model, loaded once, that decodes items with every run of a sweep.

    Args:
        task: "transcribe" | "translate" | "ocr".
        settings: the model and the task's settings.

    Raises:
        ValueError / OSError / RuntimeError: the model cannot be loaded (the load's message).
    """

    def __init__(self, task: str, settings: Settings):
        self.task, self.settings = task, settings
        if task == "transcribe":
            from core.tasks.speech import SpeechModel

            self.model = SpeechModel.load(settings.model, **({"dtype": settings.dtype}
                                                             if settings.dtype != "float32" else {}))
        elif task == "translate":
            from core.tasks.translation import TranslationModel

            self.model = TranslationModel.load(settings.model, target_language=settings.target_language,
                                               prefix=settings.source_prefix, source_language=settings.source_language,
                                               **({"dtype": settings.dtype} if settings.dtype != "float32" else {}))
        elif task == "ocr":
            from core.tasks.ocr import OCRModel

            self.model = OCRModel.load(settings.model)
        else:
            raise ValueError(f"unknown task {task!r}")
        self.model_name = self.model.name + (" (shortlist)" if task == "translate" and settings.shortlist else "")
        self.worker = f"{socket.gethostname()}:{os.getpid()}"

    # ------------------------------------------------------------------ inputs
    def _source(self, item: Item) -> tuple[Any, dict, float | None]:
        """(the source decode_lanes takes, its keyword settings, audio seconds or None)."""
        s = self.settings
        if self.task == "translate":
            return item.text, {"shortlist": s.shortlist}, None
        if self.task == "transcribe":
            from core.catalog import SAMPLE_RATE
            from core.inputs.audio import load_audio

            audio = load_audio(item.path, label=item.id) if item.path else _dataset_audio(item)
            return audio, {"language": s.language, "task": s.whisper_task}, len(audio) / SAMPLE_RATE
        from core.inputs.images import load_image

        image = load_image(item.path) if item.path else load_image(_dataset_value(item))
        return image, {"lines": self.model.detect(image, None), "region": None}, None

    # ------------------------------------------------------------------ decoding
    def decode(self, item: Item, runs: list[tuple[Run, str]]) -> list[Decoded]:
        """Decode ``item`` with every run (``(run, options hash)``) on one encoder pass per
        segment; one :class:`Decoded` per run, in order. A file that cannot be read or
        decoded gives one failure per run (never raises for the file's own faults)."""
        if not runs:
            return []
        try:
            return self._decode(item, runs)
        except (ValueError, OSError, RuntimeError) as e:
            return [Decoded(row={"file": item.id, "spec": r.spec, "seed": r.seed, "input_hash": item.input_hash,
                                 "options_hash": h, "error": str(e)}, error=str(e)) for r, h in runs]

    def _decode(self, item: Item, runs: list[tuple[Run, str]]) -> list[Decoded]:
        from core.analysis.metrics import metric_for, score
        from core.cli.trace import trace, vocab_size_of
        from core.sweep.rerun import single_run_argv
        from core.tasks.lane_spec import describe
        from core.tasks.lanes import LaneEvent, LanesFinished

        source, kwargs, audio_s = self._source(item)
        lanes = [r.options for r, _ in runs]
        per_lane: list[list] = [[] for _ in lanes]
        done: LanesFinished | None = None
        for ev in self.model.decode_lanes(source, lanes, **kwargs):
            if isinstance(ev, LaneEvent):
                per_lane[ev.lane].append(ev.event)
            elif isinstance(ev, LanesFinished):
                done = ev
        if done is None:
            raise RuntimeError("the lanes ended without a result")
        metric = metric_for(self.task)
        silent = item.reference is not None and not item.reference.strip()
        encode_s = done.stats.encode_s
        vocab, dtype = vocab_size_of(self.model), getattr(self.model, "dtype", "float32")  # as the model loaded
        out = []
        for (run, ohash), lane, events in zip(runs, done.lanes, per_lane):
            value = None
            if item.reference is not None and not silent:
                try:
                    value = score(metric, lane.text, item.reference).value
                except ValueError:  # a reference of punctuation only
                    value = None
            signals = self._signals(events)
            row = {
                "file": item.id, "spec": run.spec, "seed": run.seed, "strategy": describe(run.options),
                "metric": metric, "value": value, "logprob": _num(lane.logprob), "raw_logprob": _num(lane.raw_logprob),
                "tokens": lane.n_tokens, "decode_s": lane.time_s, "encode_s": encode_s, "audio_s": audio_s,
                "rtf": (encode_s + lane.time_s) / audio_s if audio_s else None, **signals,
                "silent_reference": silent, "reason": lane.reason, "text": lane.text, "reference": item.reference,
                "token_ids": list(lane.token_ids), "input_hash": item.input_hash, "options_hash": ohash,
                "trace": trace_name(item.input_hash, ohash), "worker": self.worker,
            }
            doc = trace(self.task, self.model_name, run.options, events, None, vocab, dtype)
            doc["sweep"] = {k: row[k] for k in ("file", "spec", "seed", "metric", "value", "reference",
                                                "input_hash", "options_hash")}
            # the row's file alone on the command line: `gunzip -k` the trace, then `decoding-explorer replay` it
            doc["rerun"]["argv"] = single_run_argv(self.task, self.settings, run.options, path=item.path,
                                                   text=item.text)
            if item.path:
                doc["rerun"]["input"] = {"path": item.path, "sha256": item.input_hash}
            elif item.text is not None:
                doc["rerun"]["input"] = {"text_sha256": item.input_hash}
            out.append(Decoded(row=row, trace=gzip.compress(json.dumps(doc, ensure_ascii=False).encode("utf-8"),
                                                             compresslevel=6, mtime=0)))
        return out

    def _signals(self, events: list) -> dict:
        """The hallucination signals of one lane's events (module docstring)."""
        from core.events import SegmentEvent, StepEvent
        from core.tasks.longform_verdicts import compression_ratio
        from core.tasks.speech_windows import window_warnings

        from core.tasks.speech_windows import SKIPPED

        segments = [ev for ev in events if isinstance(ev, SegmentEvent)]
        skipped = sum(1 for ev in segments if ev.label.endswith(SKIPPED))
        no_speech = sum(1 for ev in segments if ev.no_speech_prob is not None and ev.no_speech_prob > NO_SPEECH_THRESHOLD)
        repetitions = len(window_warnings(events, self.model.backend.decode))
        fallbacks = 0
        if self.task == "transcribe":
            steps: dict[int, list] = {}
            for ev in events:
                if isinstance(ev, StepEvent):
                    steps.setdefault(ev.segment, []).append(ev)
            for seg in steps.values():
                text = self.model.backend.decode([s.token_id for s in seg])
                avg = sum(math.log(max(s.raw_prob, 1e-45)) for s in seg) / (len(seg) + 1)
                if compression_ratio(text) > COMPRESSION_RATIO_THRESHOLD or avg < LOGPROB_THRESHOLD:
                    fallbacks += 1
        return {"segments": len(segments), "skipped": skipped, "no_speech": no_speech, "fallbacks": fallbacks,
                "repetitions": repetitions}

    def decode_batch(self, batch: list[tuple[Item, list[tuple[Run, str]]]]) -> list[Decoded]:
        """:meth:`decode` for each ``(item, runs)`` of ``batch``, all results in order."""
        out: list[Decoded] = []
        for item, runs in batch:
            out.extend(self.decode(item, runs))
        return out


def _num(x: float) -> float | None:
    return None if x == float("-inf") or (isinstance(x, float) and math.isnan(x)) else float(x)


def _dataset_value(item: Item):
    from core.sweep.data import load_dataset_split

    folder, split, index, column = item.dataset
    return load_dataset_split(folder, split)[index][column]


def _dataset_audio(item: Item):
    """The audio of a data-set row: a ``datasets`` Audio value (``{"array", "sampling_rate"}``,
    or ``{"path", "bytes"}``), resampled to 16 kHz mono float32."""
    import io

    import numpy as np

    from core.catalog import SAMPLE_RATE
    from core.inputs.audio import load_audio

    value = _dataset_value(item)
    if isinstance(value, dict) and value.get("array") is not None:
        import soxr

        audio = np.asarray(value["array"], dtype=np.float32)
        if audio.ndim > 1:
            audio = audio.mean(axis=-1)
        rate = int(value.get("sampling_rate") or SAMPLE_RATE)
        return audio if rate == SAMPLE_RATE else soxr.resample(audio, rate, SAMPLE_RATE, "HQ").astype(np.float32)
    if isinstance(value, dict) and value.get("bytes"):
        return load_audio(io.BytesIO(value["bytes"]), label=item.id)
    if isinstance(value, dict) and value.get("path"):
        return load_audio(value["path"], label=item.id)
    raise ValueError(f"{item.id}: the audio column holds {type(value).__name__}, not audio; give --audio-column")

