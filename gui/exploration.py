"""Exploration files: a tab's branch tree as JSON, to share or to continue another day.

File → Save exploration… writes, File → Open exploration… reads::

    {"format": "decoding-explorer-exploration", "version": 1, "saved": "2025-…",
     "task": "speech", "model": "whisper-tiny.en",
     "input": {"description": "sample.wav (6.2 s audio)", "sha256": "…", "settings": {"language": "en", …}},
     "current": 1, "selected": 7,
     "branches": [{"id": 0, "parent": null, "fork_step": 0, "forced_ids": [], "forced_text": "",
                   "replaced_text": "", "note": "", "options": {…DecodingOptions…},
                   "finished": {"text", "token_ids", "reason", "cancelled", "stats"} | null,
                   "segments": [{SegmentEvent fields}],
                   "steps": [{StepEvent fields: step, token_id, text, prob, raw_prob,
                              topk [[id, text, p], …], raw_topk, entropy, segment, …,
                              stages [{name, kept, mass, probs, amateur?, note?}], "attention": {…}}],
                   "rounds": [{SpeculationRound fields; drafted [[id, text, q, p, ratio, u, accepted,
                               judged], …], residual_topk [[id, text, p], …]}]}, …]}

``rounds`` (speculative decoding's rounds of the branch's own steps) and the finished run's
``stats.speculative`` (its SpeculationSummary fields) are there for speculative runs only.

A branch holds only its own steps (from its fork step on); the steps before come from its
parent, as in :class:`~gui.run_state.RunState`. Cross-attention is optional: by default
each step keeps its attention averaged over layers and heads (float16, base64; shape
(1, 1, source columns)), so the heatmap works again after opening at a fraction of the
size; ``attention="full"`` keeps every layer and head, ``"none"`` nothing.

Opening checks the task, the model and the input's hash against the tab's own
(:func:`check`) and says what to do when they differ. A hand-edited file with an impossible
value (a token id past the model's vocabulary, ``current`` not a branch, a ``fork_step``
past its parent's steps, ``selected`` not a step, a ``task`` that its input is not for) is
refused on open with one message naming the field (:func:`check_task`, :func:`validate`).
Torch-free, Qt-free except for the RunState the branches go into.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import math
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from core.events import (
    DraftToken,
    Finished,
    RunStats,
    SegmentEvent,
    SpeculationRound,
    SpeculationSummary,
    StageReport,
    StepEvent,
    TokenProb,
)
from core.inputs.json_file import read_json
from core.options import DecodingOptions

from .run_state import Branch, RunState

FORMAT = "decoding-explorer-exploration"
VERSION = 1
ATTENTION_MODES = ("mean", "full", "none")
TASK_TITLES = {"speech": "Speech", "ocr": "OCR", "translation": "Translation"}


class ExplorationError(ValueError):
    """An exploration file that cannot be opened here; the message says what to do."""


#: the input settings each tab saves (``input_settings()``): they tell which tab a file is for
TASK_SETTINGS = {"speech": {"language", "task", "timestamps", "language_candidates"}, "ocr": {"region"},
                 "translation": {"shortlist"}}
#: the input descriptions each tab writes (``input_identity()``)
TASK_DESCRIPTIONS = {"speech": re.compile(r".*\(\d+(?:\.\d+)? s audio\)$", re.S),
                     "ocr": re.compile(r".*\(\d+×\d+ px(?:, region .*)?\)$", re.S),
                     "translation": re.compile(r"^the text .*\(\d+ characters\)$", re.S)}


# ---------------------------------------------------------------- arrays
def _array_to_json(a: np.ndarray, dtype: str = "float16") -> dict:
    a = np.ascontiguousarray(np.asarray(a, dtype=dtype))
    return {"shape": list(a.shape), "dtype": dtype, "data": base64.b64encode(a.tobytes()).decode("ascii")}


def _array_from_json(d: dict) -> np.ndarray:
    a = np.frombuffer(base64.b64decode(d["data"]), dtype=d.get("dtype", "float16"))
    return a.reshape(d["shape"]).astype(np.float32)


def _num(v: float) -> float | str:
    """A float JSON can hold (inf and nan as strings)."""
    v = float(v)
    return v if math.isfinite(v) else repr(v)


# ---------------------------------------------------------------- events
def step_to_json(ev: StepEvent, attention: str = "mean") -> dict:
    """One StepEvent as plain JSON data (every field; ``attention`` as described above)."""
    out: dict[str, Any] = {}
    for f in fields(StepEvent):
        v = getattr(ev, f.name)
        if f.name in ("topk", "raw_topk", "stage_candidates"):
            out[f.name] = [[tp.id, tp.text, _num(tp.prob)] for tp in v]
        elif f.name == "stages":
            out[f.name] = [{"name": s.name, "kept": s.kept, "mass": _num(s.mass),
                            "probs": [_num(p) for p in np.asarray(s.probs, np.float64)],
                            **({} if s.amateur is None else
                               {"amateur": [_num(p) for p in np.asarray(s.amateur, np.float64)]}),
                            **({"note": s.note} if s.note else {})} for s in v]
        elif f.name == "cross_attention":
            if v is not None and attention != "none":
                a = np.asarray(v, np.float32)
                if attention == "mean" and a.ndim == 3:
                    a = a.mean(axis=(0, 1), keepdims=True)
                out["attention"] = _array_to_json(a)
        elif isinstance(v, (bool, int, str)) or v is None:
            out[f.name] = v
        elif isinstance(v, (float, np.floating)):
            out[f.name] = _num(v)
        elif isinstance(v, np.integer):
            out[f.name] = int(v)
    return out


def step_from_json(d: dict) -> StepEvent:
    """The StepEvent of :func:`step_to_json`'s data (unknown keys ignored)."""
    known = {f.name for f in fields(StepEvent)}
    kw: dict[str, Any] = {k: v for k, v in d.items() if k in known and k not in ("topk", "raw_topk", "stages",
                                                                                 "stage_candidates")}
    for k in ("prob", "raw_prob", "entropy", "raw_entropy", "raw_varentropy", "mu"):
        if isinstance(kw.get(k), str):
            kw[k] = float(kw[k])
    for k in ("topk", "raw_topk"):
        kw[k] = [TokenProb(int(i), str(t), float(p)) for i, t, p in d.get(k, [])]
    kw["stage_candidates"] = tuple(TokenProb(int(i), str(t), float(p)) for i, t, p in d.get("stage_candidates", []))
    kw["stages"] = tuple(StageReport(s["name"], int(s["kept"]), float(s["mass"]),
                                     np.array([float(p) for p in s["probs"]], np.float32),
                                     None if s.get("amateur") is None else
                                     np.array([float(p) for p in s["amateur"]], np.float32),
                                     str(s.get("note", ""))) for s in d.get("stages", []))
    if "attention" in d:
        kw["cross_attention"] = _array_from_json(d["attention"])
    return StepEvent(**kw)


def _plain_fields(obj: Any) -> dict:
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


def _floats_to_json(obj: Any) -> dict:
    return {k: (_num(v) if isinstance(v, float) else v) for k, v in _plain_fields(obj).items()}


def _stats_to_json(st: RunStats) -> dict:
    out = _floats_to_json(st)
    if st.speculative is not None:
        out["speculative"] = _floats_to_json(st.speculative)
    return out


def _stats_from_json(d: dict) -> RunStats:
    known = {f.name for f in fields(RunStats)}
    kw = {k: (float(v) if isinstance(v, str) else v) for k, v in d.items() if k in known and k != "speculative"}
    spec = d.get("speculative")
    if isinstance(spec, dict):
        names = {f.name for f in fields(SpeculationSummary)}
        kw["speculative"] = SpeculationSummary(**{k: v for k, v in spec.items() if k in names})
    return RunStats(**kw)


def round_to_json(r: SpeculationRound) -> dict:
    """One SpeculationRound as plain JSON data (every field)."""
    out = _floats_to_json(r)
    out["drafted"] = [[t.id, t.text, _num(t.q), _num(t.p), _num(t.ratio), None if t.u is None else _num(t.u),
                       t.accepted, t.judged] for t in r.drafted]
    out["residual_topk"] = [[tp.id, tp.text, _num(tp.prob)] for tp in r.residual_topk]
    return out


def round_from_json(d: dict) -> SpeculationRound:
    """The SpeculationRound of :func:`round_to_json`'s data (unknown keys ignored)."""
    known = {f.name for f in fields(SpeculationRound)}
    kw: dict[str, Any] = {k: v for k, v in d.items() if k in known and k not in ("drafted", "residual_topk")}
    for k in ("draft_ms", "target_ms"):
        if k in kw:
            kw[k] = float(kw[k])
    kw["drafted"] = tuple(DraftToken(int(i), str(t), float(q), float(p), float(ratio), None if u is None else float(u),
                                     bool(acc), bool(judged)) for i, t, q, p, ratio, u, acc, judged in d.get("drafted", []))
    kw["residual_topk"] = [TokenProb(int(i), str(t), float(p)) for i, t, p in d.get("residual_topk", [])]
    return SpeculationRound(**kw)


def _finished_to_json(fin: Finished | None) -> dict | None:
    if fin is None:
        return None
    return {"text": fin.text, "token_ids": [int(t) for t in fin.token_ids], "reason": fin.reason,
            "cancelled": fin.cancelled, "stats": _stats_to_json(fin.stats)}


def _finished_from_json(d: dict | None) -> Finished | None:
    if d is None:
        return None
    return Finished(text=d["text"], token_ids=[int(t) for t in d["token_ids"]], stats=_stats_from_json(d["stats"]),
                    cancelled=bool(d.get("cancelled", False)), reason=d.get("reason", "eos"))


def _segment_from_json(d: dict) -> SegmentEvent:
    known = {f.name for f in fields(SegmentEvent)}
    return SegmentEvent(**{k: v for k, v in d.items() if k in known})


# ---------------------------------------------------------------- whole files
def to_json(run: RunState, *, task: str, model: str, input_description: str, input_hash: str,
            input_settings: dict | None = None, attention: str = "mean") -> dict:
    """The exploration in ``run`` as JSON data (see the module docstring)."""
    if attention not in ATTENTION_MODES:
        raise ValueError(f"attention must be one of {ATTENTION_MODES}, got {attention!r}")
    branches = []
    for b in run.branches():
        opts = b.options.to_dict() if isinstance(b.options, DecodingOptions) else None
        branches.append({
            "id": b.id, "parent": b.parent, "fork_step": b.fork_step, "forced_ids": list(b.forced_ids),
            "forced_text": b.forced_text, "replaced_text": b.replaced_text, "note": b.note,
            "input_change": b.input_change, "options": _jsonable(opts), "finished": _finished_to_json(b.finished),
            "segments": [_plain_fields(b.segments[k]) for k in sorted(b.segments)],
            "steps": [step_to_json(b.own[k], attention) for k in sorted(b.own)],
            **({"rounds": [round_to_json(r) for r in sorted(b.rounds.values(), key=lambda r: r.step)]}
               if b.rounds else {}),
        })
    return {
        "format": FORMAT, "version": VERSION,
        "saved": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "task": task, "model": model,
        "input": {"description": input_description, "sha256": input_hash, "settings": _jsonable(input_settings or {})},
        "current": run.current_branch(), "selected": run.selected(),
        "branches": branches,
    }


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, float):
        return _num(v)
    return v


def save(path: str | Path, data: dict) -> None:
    """Write ``data`` (from :func:`to_json`) to ``path`` (UTF-8 JSON).

    Raises:
        OSError: the file cannot be written.
    """
    Path(path).write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")


def load(path: str | Path) -> dict:
    """Read an exploration file.

    Raises:
        ExplorationError: not readable, not JSON, not an exploration, or a newer version.
    """
    path = Path(path)
    data = read_json(path, unreadable=lambda why: ExplorationError(f"Cannot read {path.name}: {why}"),
                     not_json=lambda why: ExplorationError(f"{path.name} is not an exploration file (not JSON: {why})."))
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ExplorationError(f"{path.name} is not an exploration file (File → Save exploration… writes them).")
    if int(data.get("version", 0)) > VERSION:
        raise ExplorationError(f"{path.name} was written by a newer version (format {data.get('version')}; this "
                               f"app reads up to {VERSION}). Update the app to open it.")
    check_task(data)
    return data


def _impossible(field: str, value: Any, why: str) -> ExplorationError:
    """The one-line error for a field with an impossible value."""
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:39] + "…"
    return ExplorationError(f"The exploration file has an impossible value: {field} is {shown}; {why}. "
                            "The file was edited by hand or damaged: fix that field, or open a saved copy.")


def content_task(data: dict) -> str | None:
    """The task (``"speech"``, ``"ocr"``, ``"translation"``) the file's input is for, from the
    input settings and description each tab writes; None when they do not say."""
    inp = data.get("input") if isinstance(data.get("input"), dict) else {}
    settings = inp.get("settings") if isinstance(inp.get("settings"), dict) else {}
    found = {task for task, keys in TASK_SETTINGS.items() if keys & set(settings)}
    desc = str(inp.get("description", ""))
    found |= {task for task, pattern in TASK_DESCRIPTIONS.items() if pattern.match(desc)}
    return found.pop() if len(found) == 1 else None


def check_task(data: dict) -> None:
    """Refuse a file whose ``task`` is not a tab, or not the task its input is for (a hand
    edit: opening it would switch to the wrong tab).

    Raises:
        ExplorationError: naming the ``task`` field and the task the input is for.
    """
    task = data.get("task")
    if task not in TASK_TITLES:
        raise _impossible("'task'", task, f"it must be one of {', '.join(repr(t) for t in TASK_TITLES)}")
    found = content_task(data)
    if found is not None and found != task:
        desc = data.get("input", {}).get("description", "its input")
        raise _impossible("'task'", task, f"the file's input ({desc}) is a {TASK_TITLES[found]} tab's input, so "
                                          f"'task' should be {found!r}")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_id(field: str, value: Any, vocab_size: int | None, model: str) -> None:
    if not _int(value):
        raise _impossible(field, value, "a token id is a whole number")
    if value < 0:
        raise _impossible(field, value, "token ids are >= 0")
    if vocab_size is not None and value >= vocab_size:
        raise _impossible(field, value, f"{model}'s vocabulary has {vocab_size} tokens (ids 0–{vocab_size - 1})")


def _check_prob(field: str, value: Any) -> None:
    try:
        p = float(value)
    except (TypeError, ValueError):
        raise _impossible(field, value, "a probability is a number from 0 to 1") from None
    if not 0.0 <= p <= 1.0 + 1e-6:
        raise _impossible(field, value, "a probability is a number from 0 to 1")


def validate(data: dict, *, vocab_size: int | None = None) -> None:
    """Check a file's tree before it is built: unique branch ids, each parent listed before
    its child, fork steps within their parent's steps, steps not before their branch's fork
    step, token ids (steps, top-k lists, forced ids, finished ids) within ``vocab_size`` (when
    known), probabilities in 0..1, ``current`` a branch and ``selected`` a step of it (or null).

    Raises:
        ExplorationError: one line naming the first bad field (``branches[1].fork_step``) and
            why its value is impossible.
    """
    model = repr(data.get("model") or "the model")
    branches = data.get("branches")
    if not isinstance(branches, list) or not branches:
        raise ExplorationError("The exploration has no branches.")
    steps_of: dict[int, set[int]] = {}
    for i, b in enumerate(branches):
        where = f"branches[{i}]"
        if not isinstance(b, dict):
            raise _impossible(where, b, "a branch is an object")
        bid, parent, fork_step = b.get("id"), b.get("parent"), b.get("fork_step", 0)
        if not _int(bid) or bid < 0:
            raise _impossible(f"{where}.id", bid, "a branch id is a whole number >= 0")
        if bid in steps_of:
            raise _impossible(f"{where}.id", bid, "an earlier branch has that id")
        if not _int(fork_step) or fork_step < 0:
            raise _impossible(f"{where}.fork_step", fork_step, "a fork step is a whole number >= 0")
        if parent is None:
            if i != 0:
                raise _impossible(f"{where}.parent", parent, "only the first branch is the root")
            if fork_step != 0:
                raise _impossible(f"{where}.fork_step", fork_step, "the root branch starts at step 0")
            inherited: set[int] = set()
        else:
            if parent not in steps_of:
                raise _impossible(f"{where}.parent", parent, "no branch listed before it has that id")
            shared = steps_of[parent]
            last = max(shared) if shared else -1
            if fork_step > last + 1:
                raise _impossible(f"{where}.fork_step", fork_step,
                                  f"its parent (branch {parent}) has steps 0–{last}" if last >= 0
                                  else f"its parent (branch {parent}) has no steps")
            inherited = {k for k in shared if k < fork_step}
        for j, t in enumerate(b.get("forced_ids") or []):
            _check_id(f"{where}.forced_ids[{j}]", t, vocab_size, model)
        own: set[int] = set()
        for k, st in enumerate(b.get("steps") or []):
            at = f"{where}.steps[{k}]"
            if not isinstance(st, dict):
                raise _impossible(at, st, "a step is an object")
            step = st.get("step")
            if not _int(step) or step < 0:
                raise _impossible(f"{at}.step", step, "a step is a whole number >= 0")
            if step < fork_step:
                raise _impossible(f"{at}.step", step, f"its branch starts at fork_step {fork_step}")
            if step in own:
                raise _impossible(f"{at}.step", step, "an earlier step of the branch has that number")
            own.add(step)
            _check_id(f"{at}.token_id", st.get("token_id"), vocab_size, model)
            for name in ("prob", "raw_prob"):
                if name in st:
                    _check_prob(f"{at}.{name}", st[name])
            for name in ("topk", "raw_topk", "stage_candidates"):
                for n, entry in enumerate(st.get(name) or []):
                    if not isinstance(entry, (list, tuple)) or len(entry) != 3:
                        raise _impossible(f"{at}.{name}[{n}]", entry, "a candidate is [token id, text, probability]")
                    _check_id(f"{at}.{name}[{n}]", entry[0], vocab_size, model)
                    _check_prob(f"{at}.{name}[{n}] probability", entry[2])
        finished = b.get("finished")
        if isinstance(finished, dict):
            for j, t in enumerate(finished.get("token_ids") or []):
                _check_id(f"{where}.finished.token_ids[{j}]", t, vocab_size, model)
        steps_of[bid] = inherited | own
    current = data.get("current", 0)
    if not _int(current) or current not in steps_of:
        raise _impossible("'current'", current, f"the file's branches are {', '.join(map(str, steps_of))}")
    selected = data.get("selected")
    if selected is not None:
        visible = steps_of[current]
        span = f"0–{max(visible)}" if visible else "none"
        if not _int(selected) or selected not in visible:
            raise _impossible("'selected'", selected,
                              f"it must be null or a step of the current branch {current} (steps {span})")


def check(data: dict, *, task: str, model: str | None, input_description: str | None,
          input_hash: str | None) -> None:
    """Refuse ``data`` unless it is for this tab's task, model and input.

    Raises:
        ExplorationError: with what to do (open the input, load the model, use the other tab).
    """
    want_task = data.get("task")
    if want_task != task:
        raise ExplorationError(f"This exploration is from the {TASK_TITLES.get(want_task, want_task)} tab; "
                               f"open it there.")
    inp = data.get("input", {})
    desc = inp.get("description", "its input")
    if input_hash is None:
        raise ExplorationError(f"This exploration is for {desc}; open that input first, then open the exploration "
                               "again.")
    if inp.get("sha256") != input_hash:
        raise ExplorationError(f"This exploration is for {desc}, but the input here is {input_description} "
                               f"(a different content hash). Open {desc} first, then open the exploration again.")
    want_model = data.get("model")
    if model != want_model:
        have = f"model {model!r}" if model else "no model"
        raise ExplorationError(f"This exploration was made with model {want_model!r}, but the tab has {have}. "
                               f"Load {want_model!r} first, then open the exploration again.")


def _rounds_from_json(data: Any, i: int) -> dict:
    """Branch ``i``'s rounds by (segment, round).

    Raises:
        ExplorationError: a round that cannot be read (names the field).
    """
    try:
        rounds = [round_from_json(x) for x in data]
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ExplorationError(f"branches[{i}].rounds: a speculation round cannot be read ({exc}).") from None
    return {(r.segment, r.round): r for r in rounds}


def branches_from_json(data: dict, *, vocab_size: int | None = None) -> list[Branch]:
    """The branches of an exploration file, the root first, checked first (:func:`validate`;
    token ids against ``vocab_size``, the model's vocabulary size, when given).

    Raises:
        ExplorationError: the tree is broken (no root, a parent missing or listed after its
            child) or a field holds an impossible value (the message names it).
    """
    validate(data, vocab_size=vocab_size)
    out: list[Branch] = []
    seen: set[int] = set()
    for d in data.get("branches", []):
        parent = d.get("parent")
        if (parent is None) != (not out) or (parent is not None and parent not in seen):
            raise ExplorationError("The exploration's branch tree is broken (a branch before its parent, or no root).")
        opts = d.get("options")
        steps = [step_from_json(s) for s in d.get("steps", [])]
        b = Branch(
            id=int(d["id"]), parent=parent, fork_step=int(d.get("fork_step", 0)),
            forced_ids=tuple(int(t) for t in d.get("forced_ids", [])), forced_text=d.get("forced_text", ""),
            replaced_text=d.get("replaced_text", ""), note=d.get("note", ""),
            input_change=str(d.get("input_change", "") or ""), options=DecodingOptions.from_dict(opts) if opts else None,
            own={ev.step: ev for ev in steps},
            segments={s.segment: s for s in (_segment_from_json(x) for x in d.get("segments", []))},
            finished=_finished_from_json(d.get("finished")),
            rounds=_rounds_from_json(d.get("rounds", []), len(out)),
        )
        out.append(b)
        seen.add(b.id)
    if not out:
        raise ExplorationError("The exploration has no branches.")
    return out
