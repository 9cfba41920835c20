"""The Speech tab on the real bundled Whisper tiny.en (loaded through the tab's worker).

Speech comes from espeak-ng (tests/helpers/speech.py) and, when present, the bundled
sample in assets/samples/.
"""

from __future__ import annotations

import math

import jiwer
import numpy as np
import pytest

from gui.tabs.speech import FRAME_S, SAMPLE_RATE, SpeechTab, first_sample
from tests.helpers.speech import synth_speech

pytestmark = pytest.mark.e2e

SENTENCE = "Open the door and turn on the lights."
SLOW_MS = 240_000  # two shared CPU cores: loading + a full decode take tens of seconds


def _norm(s: str) -> str:
    return " ".join("".join(c for c in s.lower() if c.isalnum() or c.isspace()).split())


def _wait_decode(qtbot, tab, action):
    with qtbot.waitSignal(tab.decodeFinished, timeout=SLOW_MS) as blocker:
        action()
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=SLOW_MS)
    return blocker.args[0]


def _check_views(tab, fin, audio):
    n = fin.stats.n_tokens
    assert n > 0 and not fin.cancelled
    assert tab.stream.token_count() == n
    assert tab.heatmap.row_count() == n  # one heatmap row per emitted token
    frames = math.ceil(len(audio) / (SAMPLE_RATE * FRAME_S))
    assert tab.heatmap.column_count() == frames  # one column per 20 ms encoder frame
    assert tab.stream.text() == fin.text.strip()
    m = tab.heatmap.matrix()
    np.testing.assert_allclose(m.max(axis=1), 1.0, rtol=1e-5)  # rows normalised to their max


def test_real_tiny_en_decode_and_redecode_from_cache(qtbot, tmp_path):
    tab = SpeechTab()
    qtbot.addWidget(tab)
    tab.options_panel._timer.setInterval(20)
    errors = []
    tab.errorOccurred.connect(errors.append)

    with qtbot.waitSignal(tab.modelReady, timeout=SLOW_MS):
        tab.load_model("tiny.en")
    model = tab.model
    assert model is not None and not model.multilingual
    assert not tab.language_combo.isEnabled() and not tab.task_combo.isEnabled()

    audio = synth_speech(SENTENCE)
    fin = _wait_decode(qtbot, tab, lambda: tab.set_audio(audio, "fox"))
    assert errors == []
    _check_views(tab, fin, audio)
    assert jiwer.wer(_norm(SENTENCE), _norm(tab.stream.text())) <= 0.2, tab.stream.text()
    assert model.encode_count == 1
    # the top-k chart shows the newest step, the chosen token among its rows
    assert tab.topk.step() == fin.stats.n_tokens - 1  # nothing selected: follows the newest token
    assert any(r.chosen for r in tab.topk.rows())

    # moving a slider re-decodes from the cached encoder output
    fin2 = _wait_decode(qtbot, tab, lambda: tab.options_panel.controls["max_new_tokens"].setValue(3))
    assert fin2.stats.n_tokens == 3 and fin2.reason == "max_tokens"
    assert tab.stream.token_count() == 3 and tab.heatmap.row_count() == 3
    assert model.encode_count == 1
    assert fin2.stats.encoder_cached

    sample = first_sample()
    assert sample is not None, "the bundled sample clip is missing from assets/samples/"
    # the bundled clip through Sample: file loading + decode (max tokens is still 3)
    tab.options_panel.controls["max_new_tokens"].setValue(128)
    fin3 = _wait_decode(qtbot, tab, tab.load_sample)
    assert errors == []
    assert tab.source_name == sample.name
    _check_views(tab, fin3, tab.audio)
    assert "speech recognition" in _norm(fin3.text), fin3.text
    assert model.encode_count == 2
    tab.shutdown()
