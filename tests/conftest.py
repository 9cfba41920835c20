"""Settings and fixtures for the whole test suite.

- Qt runs headless (``QT_QPA_PLATFORM=offscreen``), set before any test imports Qt.
- ``fake_mic``: a PulseAudio fake microphone (tests/helpers/pulse.py).
- ``one_torch_thread``: torch on one thread for a module (small models; the machine's
  cores are shared). Use with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``.
"""

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from tests.helpers.pulse import fake_mic  # noqa: E402,F401  (registers the fixture)


@pytest.fixture(scope="module")
def one_torch_thread():
    """torch.set_num_threads(1) for the module, restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def whisper_base():
    """The bundled multilingual whisper-base, loaded once per session (~5 s)."""
    from core.tasks.speech import SpeechModel

    return SpeechModel.load("base")


@pytest.fixture(scope="session")
def whisper_tiny_en():
    """The bundled English-only whisper-tiny.en, loaded once per session (~2 s)."""
    from core.tasks.speech import SpeechModel

    return SpeechModel.load("tiny.en")
