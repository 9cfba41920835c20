"""Named decoding presets, built in and saved by the user (no torch, no Qt).

A preset is a *partial* options dict: the fields it names, applied over
``DecodingOptions()`` (the fields in :data:`KEPT_FIELDS` come from the options in use
unless the preset names them, so picking a preset keeps the seed and the token budget).
Each built-in preset says in its description where its numbers come from.

User presets are JSON files in a directory the caller passes in (the GUI uses
``QStandardPaths.AppDataLocation``/presets; tests a temporary folder)::

    {"format": 1, "name": "my preset", "description": "...", "options": {"temperature": 0.7, ...}}

A file that is not such an object, names an unknown option or holds a value the options
reject raises ``ValueError`` naming the file and what is wrong.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from core.inputs.json_file import read_json
from core.options import LLAMA_CPP_SAMPLER_ORDER, STAGES, DecodingOptions

FORMAT = 1
"""The user preset file format written by :func:`save_user_preset`."""

KEPT_FIELDS = ("max_new_tokens", "seed", "top_k_report", "capture_attention", "capture_lens")
"""Fields a preset leaves as they are unless it names them."""

NOT_SAVED = ("top_k_report", "capture_attention", "capture_lens")
"""Fields a saved user preset leaves out: how much is reported, not how tokens are chosen."""


@dataclass(frozen=True)
class Preset:
    """A named partial set of decoding options.

    Attributes:
        name: shown in the preset box; unique among built-in and user presets.
        description: one line saying what it is and where its numbers come from.
        values: option field -> value (a partial ``DecodingOptions.to_dict()``).
        builtin: False for a user preset (loaded from a file).
        path: the file of a user preset, else None.
    """

    name: str
    description: str
    values: Mapping[str, Any] = field(default_factory=dict)
    builtin: bool = True
    path: Path | None = None

    def apply(self, current: DecodingOptions | None = None) -> DecodingOptions:
        """``DecodingOptions()`` with this preset's values, the :data:`KEPT_FIELDS` taken
        from ``current`` unless the preset names them; validated."""
        start = DecodingOptions()
        if current is not None:
            start = replace(start, **{f: getattr(current, f) for f in KEPT_FIELDS})
        return DecodingOptions.from_dict({**start.to_dict(), **dict(self.values)})


BUILTIN_PRESETS: tuple[Preset, ...] = (
    Preset(
        "Decoding Explorer defaults",
        "This app's defaults (DecodingOptions()): greedy, every stage of the chain off, transformers' order.",
        {},
    ),
    Preset(
        "transformers defaults",
        "transformers generate() with do_sample=True and nothing else set: temperature 1.0, top_k 50, "
        "top_p 1.0 (GenerationConfig._get_default_generation_params).",
        {"strategy": "sample", "temperature": 1.0, "top_k": 50, "top_p": 1.0},
    ),
    Preset(
        "openai/whisper defaults",
        "openai/whisper transcribe(): the first try at temperature 0 is greedy (beam_size and best_of unset), "
        "sample_len = n_text_ctx // 2 = 224 tokens; the temperature fallback is not applied here.",
        {"strategy": "greedy", "max_new_tokens": 224},
    ),
    Preset(
        "llama.cpp defaults",
        "llama.cpp common/common.h common_params_sampling: temp 0.80, top_k 40, top_p 0.95, min_p 0.05, "
        "in llama.cpp's sampler order (penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature).",
        {
            "strategy": "sample",
            "temperature": 0.8,
            "top_k": 40,
            "top_p": 0.95,
            "min_p": 0.05,
            "sampler_order": LLAMA_CPP_SAMPLER_ORDER,
        },
    ),
    Preset(
        "creative",
        "Sampling at temperature 1.5 kept coherent by min-p 0.1: the high-temperature min-p pairing argued for "
        "by Nguyen et al. 2024 (min-p paper); the exact numbers are this app's choice.",
        {"strategy": "sample", "temperature": 1.5, "min_p": 0.1},
    ),
    Preset(
        "precise",
        "text-generation-webui's LLaMA-Precise preset (presets/LLaMA-Precise.yaml): temperature 0.7, "
        "top_p 0.1, top_k 40, repetition_penalty 1.18.",
        {"strategy": "sample", "temperature": 0.7, "top_p": 0.1, "top_k": 40, "repetition_penalty": 1.18},
    ),
)
"""The built-in presets, in the order the preset box lists them."""

BUILTIN_NAMES = tuple(p.name for p in BUILTIN_PRESETS)


def builtin_preset(name: str) -> Preset:
    """The built-in preset called ``name``.

    Raises:
        KeyError: no built-in preset has that name.
    """
    for p in BUILTIN_PRESETS:
        if p.name == name:
            return p
    raise KeyError(name)


# ------------------------------------------------------------------ user presets
def _field_types() -> dict[str, Any]:
    return {f.name: f.default for f in fields(DecodingOptions)}


def check_values(values: Any, where: str = "preset") -> dict[str, Any]:
    """``values`` as a clean partial options dict (lists become tuples, ints in float
    fields become floats), checked by ``DecodingOptions``.

    Raises:
        ValueError: ``values`` is not an object, names an unknown option, holds a value of
            the wrong type, or one the options reject; the message starts with ``where``.
    """
    if not isinstance(values, Mapping):
        raise ValueError(f"{where}: 'options' must be an object of option: value, got {type(values).__name__}")
    defaults = _field_types()
    unknown = sorted(k for k in values if k not in defaults)
    if unknown:
        raise ValueError(f"{where}: unknown option(s) {', '.join(map(repr, unknown))}")
    clean: dict[str, Any] = {}
    for key, value in values.items():
        ref = defaults[key]
        bad = ValueError(f"{where}: option {key!r} has the wrong type ({type(value).__name__}: {value!r})")
        if key == "seed":
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise bad
        elif isinstance(ref, bool):
            if not isinstance(value, bool):
                raise bad
        elif isinstance(ref, int):
            if isinstance(value, bool) or not isinstance(value, int):
                raise bad
        elif isinstance(ref, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise bad
            value = float(value)
        elif isinstance(ref, str):
            if not isinstance(value, str):
                raise bad
        elif isinstance(ref, tuple):
            if not isinstance(value, (list, tuple)):
                raise bad
            if key == "logit_bias":
                if not all(isinstance(e, (list, tuple)) and len(e) == 2 and isinstance(e[0], str)
                           and isinstance(e[1], (int, float)) and not isinstance(e[1], bool) for e in value):
                    raise ValueError(f"{where}: option 'logit_bias' must be a list of [text, bias] pairs, got {value!r}")
                value = tuple((t, float(b)) for t, b in value)
            else:
                if not all(isinstance(e, str) for e in value):
                    raise ValueError(f"{where}: option {key!r} must be a list of strings, got {value!r}")
                value = tuple(value)
                if key in ("sampler_order", "disabled_stages"):
                    unknown = [s for s in value if s not in STAGES]
                    if unknown:  # from_dict would drop them silently (old settings); a preset says so
                        raise ValueError(f"{where}: {key}: unknown stage(s) {', '.join(unknown)}; known: {', '.join(STAGES)}")
        clean[key] = value
    try:
        DecodingOptions.from_dict({**DecodingOptions().to_dict(), **clean})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None
    return clean


def load_preset(path: str | Path) -> Preset:
    """Read one user preset file.

    Raises:
        ValueError: the file cannot be read, is not JSON, or is not a valid preset; the
            message names the file and the problem.
    """
    path = Path(path)
    where = f"preset file {path.name}"
    data = read_json(path, unreadable=lambda why: ValueError(f"{where}: cannot be read ({why})"),
                     not_json=lambda why: ValueError(f"{where}: not valid JSON ({why})"))
    if not isinstance(data, dict):
        raise ValueError(f"{where}: must hold a JSON object with 'name' and 'options', got {type(data).__name__}")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{where}: needs a non-empty 'name'")
    fmt = data.get("format", FORMAT)
    if fmt != FORMAT:
        raise ValueError(f"{where}: format {fmt!r} is not known (this version reads format {FORMAT})")
    if "options" not in data:
        raise ValueError(f"{where}: needs 'options' (an object of option: value)")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ValueError(f"{where}: 'description' must be text")
    values = check_values(data["options"], where)
    return Preset(name.strip(), description or "Your preset.", values, builtin=False, path=path)


def load_user_presets(directory: str | Path, errors: list[str] | None = None) -> list[Preset]:
    """The user presets (``*.json``) in ``directory``, by name; none if it does not exist.

    A broken file raises ``ValueError``; with an ``errors`` list, its message is appended
    there instead and the file skipped (the GUI lists what it could read). A file whose
    name clashes with a built-in preset or an earlier file is reported the same way.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    presets: list[Preset] = []
    seen = set(BUILTIN_NAMES)
    for path in sorted(directory.glob("*.json")):
        try:
            preset = load_preset(path)
            if preset.name in seen:
                raise ValueError(f"preset file {path.name}: the name {preset.name!r} is already taken")
        except ValueError as exc:
            if errors is None:
                raise
            errors.append(str(exc))
            continue
        seen.add(preset.name)
        presets.append(preset)
    return sorted(presets, key=lambda p: p.name.lower())


def preset_filename(name: str) -> str:
    """The file name a preset called ``name`` is saved under."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name.strip()).strip("._") or "preset"
    return f"{stem}.json"


def save_user_preset(
    directory: str | Path, name: str, options: DecodingOptions, description: str = ""
) -> Path:
    """Save ``options`` as user preset ``name`` in ``directory`` (created if needed); a
    preset of the same name is replaced. Returns the file written.

    Raises:
        ValueError: an empty name, the name of a built-in preset, or invalid options.
    """
    name = name.strip()
    if not name:
        raise ValueError("a preset needs a name")
    if name in BUILTIN_NAMES:
        raise ValueError(f"{name!r} is a built-in preset; choose another name")
    options = options.validate()
    values = {k: v for k, v in options.to_dict().items() if k not in NOT_SAVED}
    data = {"format": FORMAT, "name": name, "description": description, "options": values}
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / preset_filename(name)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".preset-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
