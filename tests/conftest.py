"""Settings and fixtures for the whole test suite.

- Qt runs headless (``QT_QPA_PLATFORM=offscreen``), set before any test imports Qt.
- ``fake_mic``: a PulseAudio fake microphone (tests/helpers/pulse.py).
"""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from tests.helpers.pulse import fake_mic  # noqa: E402,F401  (registers the fixture)
