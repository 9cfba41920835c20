"""The three inputs a task decodes, each with the settings that go with it.

A task's methods (``core.tasks.base.Task``: ``decode``, ``decode_lanes``, ``fork``,
``what_if``, ``no_input``) take the input's source first and its settings as keywords,
``model.decode(audio, options, language="de")``; inside, the task builds one of these
dataclasses from them (:meth:`SpeechInput.of` and likewise), so the settings are checked
by name in one place. The GUI's tabs build the dataclass and hand it over with
:meth:`SpeechInput.call_args`: ``model.decode(*inp.call_args(), options, ...)`` is the same
call for every tab.

Plain data: numpy arrays, PIL images, strings; no torch, no Qt.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Sequence

import numpy as np


class _Input:
    """What the three input dataclasses share: building from keyword settings and giving
    them back as keywords (only those that differ from their defaults, so a task model that
    takes fewer settings, a test's fake, is called as before)."""

    #: the name of the field that holds the input itself (the first positional argument)
    source_field: ClassVar[str] = ""
    #: the settings a task's ``decode`` and ``decode_lanes`` do not take (a re-run's only)
    rerun_only: ClassVar[tuple[str, ...]] = ()
    #: the settings passed on even when they have their default value (the task methods of
    #: every model of this kind take them)
    always: ClassVar[tuple[str, ...]] = ()
    #: the keyword a task's ``what_if`` takes the mask by
    mask_keyword: ClassVar[str] = "mask"

    @classmethod
    def of(cls, source: Any, settings: dict, *, method: str = "decode"):
        """The input ``source`` with ``settings`` (keyword arguments of a task method).

        Raises:
            TypeError: a setting this input does not have, or a re-run-only one
                (:attr:`rerun_only`) given to ``decode`` / ``decode_lanes``; as Python says
                it for an unexpected keyword argument.
        """
        names = {f.name for f in fields(cls)} - {cls.source_field}
        for key in settings:
            if key not in names or (key in cls.rerun_only and method in ("decode", "decode_lanes")):
                raise TypeError(f"{method}() got an unexpected keyword argument {key!r}")
        return cls(source, **settings)

    @property
    def source(self) -> Any:
        """The input itself (audio, image or text)."""
        return getattr(self, self.source_field)

    def settings(self) -> dict[str, Any]:
        """The settings as a task method's keyword arguments: those in :attr:`always` and
        those that differ from their defaults."""
        out = {}
        for f in fields(self):
            if f.name == self.source_field:
                continue
            value = getattr(self, f.name)
            if f.name in self.always or value != f.default:
                out[f.name] = value
        return out

    def identity(self, name: str) -> tuple[str, str]:
        """(a description of the input for people, a SHA-256 hex digest of its content), saved
        with an exploration; ``name``: the input's file or take name."""
        raise NotImplementedError

    def call_args(self, *, rerun: bool = True) -> tuple[Any, dict[str, Any]]:
        """(source, settings) for ``model.method(source, options, **settings)``;
        ``rerun=False`` leaves out the re-run-only settings (for ``decode`` / ``decode_lanes``)."""
        settings = self.settings()
        if not rerun:
            settings = {k: v for k, v in settings.items() if k not in self.rerun_only}
        return self.source, settings


@dataclass(frozen=True, eq=False)
class SpeechInput(_Input):
    """16 kHz mono audio and how Whisper is to read it.

    Attributes:
        audio: float32 (n_samples,), 16 kHz mono, values in [-1, 1].
        language: "auto" (detected per window) or a code like "en".
        task: "transcribe" or "translate" (to English; multilingual models only).
        timestamps: decode with timestamp tokens (Whisper's timestamp rules as a hard rule).
        candidate_languages: restrict language detection to these codes; None = all.
        longform: the run re-run (forked, masked) was a long-form ``transcribe`` run: its
            windows, encoder outputs and prompts are used. Not for ``decode``.
    """

    source_field: ClassVar[str] = "audio"
    rerun_only: ClassVar[tuple[str, ...]] = ("longform",)
    always: ClassVar[tuple[str, ...]] = ("language", "task")
    mask_keyword: ClassVar[str] = "span"

    audio: Any
    language: str = "auto"
    task: str = "transcribe"
    timestamps: bool = False
    candidate_languages: Sequence[str] | None = None
    longform: bool = False

    def identity(self, name: str) -> tuple[str, str]:
        """("name (12.34 s audio)", SHA-256 of the float32 samples)."""
        from core.catalog import SAMPLE_RATE

        from core.inputs.pcm16 import Pcm16Audio

        if isinstance(self.audio, Pcm16Audio):  # a long clip kept as int16: hashed a chunk at a time, no float32 copy
            return f"{name} ({len(self.audio) / SAMPLE_RATE:.2f} s audio)", self.audio.sha256_float32()
        audio = np.ascontiguousarray(self.audio, dtype=np.float32)
        return f"{name} ({len(audio) / SAMPLE_RATE:.2f} s audio)", hashlib.sha256(audio.tobytes()).hexdigest()


@dataclass(frozen=True, eq=False)
class ImageInput(_Input):
    """An image and where to read it.

    Attributes:
        image: a PIL image (or anything ``core.inputs.images.load_image`` accepts).
        lines: the text lines to read (``OCRModel.detect``); None = detect them.
        region: (x, y, w, h) image pixels to read only that part; None = all of it.
    """

    source_field: ClassVar[str] = "image"

    image: Any
    lines: list | None = field(default=None)
    region: tuple[int, int, int, int] | None = None

    def identity(self, name: str, pixels: tuple[Any, tuple[int, ...]] | None = None) -> tuple[str, str]:
        """("name (w×h px[, region …])", SHA-256 of the RGB pixels, their shape and the region).
        ``pixels``: (a ``hashlib.sha256`` of the RGB bytes, the array's shape) when the caller
        keeps it (hashing a 4096 x 4096 image takes ~0.5 s); computed here otherwise."""
        if pixels is None:
            pixels = rgb_digest(self.image)
        digest, shape = pixels
        h = digest.copy()
        h.update(repr((shape, self.region)).encode())
        where = "" if self.region is None else ", region {2}×{3} px at ({0}, {1})".format(*self.region)
        return f"{name} ({shape[1]}×{shape[0]} px{where})", h.hexdigest()


@dataclass(frozen=True, eq=False)
class TextInput(_Input):
    """Source text and how to translate it.

    Attributes:
        text: the source text (any length; split into sentences).
        shortlist: restrict each step to the sentence's lexical shortlist (bundled models only).
    """

    source_field: ClassVar[str] = "text"
    always: ClassVar[tuple[str, ...]] = ("shortlist",)
    mask_keyword: ClassVar[str] = "drop"

    text: str
    shortlist: bool = False

    def identity(self, name: str = "") -> tuple[str, str]:
        """("the text 'The weather…' (27 characters)", SHA-256 of the UTF-8 text); ``name`` is
        not used (a typed text has none)."""
        head = " ".join(self.text.split())
        head = head if len(head) <= 40 else head[:39] + "…"
        return f"the text {head!r} ({len(self.text)} characters)", hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def rgb_digest(image: Any) -> tuple[Any, tuple[int, ...]]:
    """(``hashlib.sha256`` of ``image``'s RGB uint8 pixels, the pixel array's shape (h, w, 3))."""
    rgb = np.ascontiguousarray(np.asarray(image.convert("RGB"), dtype=np.uint8))
    return hashlib.sha256(rgb.tobytes()), rgb.shape


def check_audio(audio) -> np.ndarray:
    """``audio`` as float32 mono (n_samples,) 16 kHz samples, checked: mono, not empty, at least
    ``MIN_AUDIO_S`` long, finite. A ``core.inputs.pcm16.Pcm16Audio`` (a long clip kept as
    int16) is checked and returned as it is, not converted.

    Raises:
        ValueError: saying what is wrong and what to do.
    """
    from core.catalog import MIN_AUDIO_S, SAMPLE_RATE
    from core.inputs.pcm16 import Pcm16Audio

    if not isinstance(audio, Pcm16Audio):  # int16 kept as is, read a window at a time (always finite)
        audio = np.asarray(audio)
    if audio.ndim != 1:
        raise ValueError(f"audio must be mono (n_samples,), got shape {audio.shape}; mix channels down first")
    if audio.size == 0:
        raise ValueError("the audio is empty (0 samples); record or open a clip with speech")
    if audio.size < MIN_AUDIO_S * SAMPLE_RATE:
        raise ValueError(
            f"the audio is too short ({audio.size / SAMPLE_RATE * 1000:.0f} ms); give at least {MIN_AUDIO_S:.1f} s"
        )
    if isinstance(audio, Pcm16Audio):
        return audio
    audio = audio.astype(np.float32, copy=False)
    if not np.all(np.isfinite(audio)):
        raise ValueError("the audio holds NaN or infinite samples; the file or recording is corrupt")
    return audio
