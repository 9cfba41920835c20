"""While a long-form run is live, the text line under the token chips shows the text without
whisper's timestamp tokens (issue 19 §5: it showed ``care.<|3.80|><|3.80|> The market…``),
as the final text does. A fake long-form model that holds before its Finished event."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from core.events import AttemptEvent, Finished, RunStats, SegmentEvent

from .fakes import make_step
from .fakes_longform import FakeLongFormModel
from .tab_helpers import TONE, speech_tab

TOKENS = ["<|0.00|>", " Take", " care", ".", "<|3.80|>", "<|3.80|>", " The", " market", " opens", ".", "<|6.10|>"]
LIVE = "Take care. The market opens."


class HeldLongForm(FakeLongFormModel):
    """One long-form window of ``TOKENS`` (timestamp tokens included, as whisper's steps
    carry them); the run waits on ``release`` before it finishes."""

    def __init__(self):
        super().__init__()
        self.release = threading.Event()

    def transcribe(self, audio, options, longform=None, *, language="auto", task="transcribe", cancel=None):
        yield SegmentEvent(segment=0, label="0.00–30.00 s · seek 0", source_offset=0, source_len=50, kind="window")
        steps = [dataclasses.replace(make_step(i, t), segment=0) for i, t in enumerate(TOKENS)]
        yield from steps
        self.release.wait(10)
        yield AttemptEvent(segment=0, attempt=0, temperature=0.0, step_offset=0, steps=tuple(steps),
                           token_ids=tuple(e.token_id for e in steps), text=LIVE, seek=0, start=0.0, end=6.1,
                           verdict="accepted", kept_in_transcript=True, kept_tokens=len(steps))
        yield Finished(text=LIVE, token_ids=[e.token_id for e in steps], stats=RunStats(), reason="eos")


@pytest.fixture
def tab(qtbot):
    model = HeldLongForm()
    yield from speech_tab(qtbot, model)
    model.release.set()


def test_live_long_form_text_has_no_timestamp_tokens(qtbot, tab):
    tab.longform_panel.mode_combo.setCurrentIndex(1)  # long-form
    tab.set_audio(TONE, "tone")
    qtbot.waitUntil(lambda: tab.stream.token_count() == len(TOKENS), timeout=5000)
    assert tab.is_decoding()
    live = tab.stream.text()
    assert "<|" not in live and " ".join(live.split()) == LIVE
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.model.release.set()
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    assert tab.stream.text() == LIVE


def test_live_text_drops_only_timestamp_tokens():
    from gui.widgets.token_text import live_text

    assert live_text(["<|0.00|>", " Hi", ".", "<|1.20|>", "<|1.20|>", " Yes", "<|29.98|>"]) == " Hi. Yes"
    assert live_text(["▁Um", "▁pássaro"]) == " Um pássaro"
    assert live_text([" a", "<|", "x|>", " <|en|>"]) == " a<|x|> <|en|>"  # only whole timestamp tokens go
