"""What audio files (``core.inputs.audio``) and the microphone (``core.inputs.microphone``)
share: the error they raise, the sample rate the models take and the resampling quality.

Both modules import this one and never each other at import time (``core.inputs.audio``
re-exports the microphone's names lazily). No Qt, no torch.
"""

from __future__ import annotations

from core.catalog import SAMPLE_RATE  # noqa: F401  (16 kHz: all audio handed to the models)

#: libsoxr quality for every rate conversion ("HQ": python-soxr's default)
RESAMPLE_QUALITY = "HQ"


class AudioError(Exception):
    """An audio file or device problem, with a message for the user.

    The message says what went wrong and what to do about it; the GUI shows it as is.
    """
