"""Settings and fixtures for the whole test suite.

- Qt runs headless (``QT_QPA_PLATFORM=offscreen``), set before any test imports Qt.
- ``fake_mic``: a PulseAudio fake microphone (tests/helpers/pulse.py).
- ``one_torch_thread``: torch on one thread for a module (small models; the machine's
  cores are shared). Use with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``.
- ``whisper_base``, ``whisper_tiny_en``, ``ocr_bundled``, ``translation_en_pt``: the bundled
  models, each loaded once per session; a module that counts a model's encoder passes from 0
  or changes the model loads its own.
- ``cli_reuses_models``: the CLI run in-process (``core.cli.main``) gets those session models
  from its ``*.load`` calls instead of loading them again (1-6 s a load, and the encoder
  cache is kept).
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


def _real_load(cls):
    """``cls.load`` as the class defines it, under ``cli_reuses_models`` too (a session model
    first asked for while that fixture is in force must still be loaded)."""
    load = cls.load
    while hasattr(load.__func__, "real_load"):
        load = load.__func__.real_load
    return load


@pytest.fixture(scope="session")
def whisper_base():
    """The bundled multilingual whisper-base, loaded once per session (~5 s)."""
    from core.tasks.speech import SpeechModel

    return _real_load(SpeechModel)("base")


@pytest.fixture(scope="session")
def whisper_tiny_en():
    """The bundled English-only whisper-tiny.en, loaded once per session (~2 s)."""
    from core.tasks.speech import SpeechModel

    return _real_load(SpeechModel)("tiny.en")


@pytest.fixture(scope="session")
def ocr_bundled():
    """The bundled OCR reader (english_g2 + CRAFT), loaded once per session (~3-6 s)."""
    from core.tasks.ocr import OCRModel

    return _real_load(OCRModel)("bundled")


@pytest.fixture(scope="session")
def translation_en_pt():
    """The bundled Bergamot en-pt direction in float32, loaded once per session (~1 s)."""
    from core.tasks.translation import TranslationModel

    return _real_load(TranslationModel)("en-pt")


#: (module, model class) -> {name given to its ``load``: the session fixture holding that model loaded}
_SESSION_MODELS = {
    ("core.tasks.speech", "SpeechModel"): {"base": "whisper_base", "tiny.en": "whisper_tiny_en"},
    ("core.tasks.ocr", "OCRModel"): {"bundled": "ocr_bundled"},
    ("core.tasks.translation", "TranslationModel"): {"en-pt": "translation_en_pt"},
}


@pytest.fixture
def cli_reuses_models(request, monkeypatch):
    """The CLI run in this process gets the session's loaded models instead of loading them
    again (each load costs 1-6 s): ``SpeechModel.load("base" | "tiny.en")``,
    ``OCRModel.load("bundled")`` and ``TranslationModel.load("en-pt")`` with no argument
    beyond ``progress`` other than defaults (float32, no languages, no prefix) return
    ``whisper_base``, ``whisper_tiny_en``, ``ocr_bundled``, ``translation_en_pt``. Any other
    load (another name, int8, a target language, an OCR ``stage`` callback) is the real one.

    For tests of what the CLI decodes and prints, not of how it loads a model.
    """
    import importlib

    for (module, cls_name), names in _SESSION_MODELS.items():
        cls = getattr(importlib.import_module(module), cls_name)

        def load(cls, *args, _real=cls.load, _names=names, **kw):
            name = args[0] if args else kw.get("name")
            rest = {k: v for k, v in kw.items() if k not in ("name", "progress") and v is not None}
            if rest.get("dtype") == "float32":
                del rest["dtype"]
            if name in _names and len(args) <= 2 and not rest:
                return request.getfixturevalue(_names[name])
            return _real(*args, **kw)

        load.real_load = cls.load
        monkeypatch.setattr(cls, "load", classmethod(load))
