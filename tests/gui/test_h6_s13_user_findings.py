"""Session 13, H6: the defects H5's click-through at 1280x800 left (/work/notes/s13/h5/), each as a
test that failed before its fix: the KV cache on/off comparison in the step strip, the views of
the previous offline run during a live session, the live input label, byte tokens' text, and
the translation's status bar at its end."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from core.events import StepEvent
from core.options import DecodingOptions

from .fakes import FakeSpeechModel
from .tab_helpers import TONE, decoded, shown_window


class TimedFakeSpeechModel(FakeSpeechModel):
    """The fake with a decoder time per step: flat with the KV cache on (4 ms), growing with
    the step with it off (4 ms x (step + 1)), as a real model's."""

    def decode(self, audio, options, **kw):
        for ev in super().decode(audio, options, **kw):
            if isinstance(ev, StepEvent):
                ms = 4.0 if options.kv_cache else 4.0 * (ev.step + 1)
                ev = dataclasses.replace(ev, time_ms=ms)
            yield ev


def _run(qtbot, tab, options):
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.options_panel.setOptions(options, emit=True)
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)


def test_the_step_strip_keeps_the_other_kv_cache_settings_run_as_a_reference(qtbot, settings, tmp_path):
    """Before: the strip plotted only the current run's decoder ms, scaled to its own maximum, so
    a cache-off run's growth could not be compared with the cache-on run (issue 22)."""
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    tab.options_panel._timer.setInterval(20)
    tab.model = TimedFakeSpeechModel()
    decoded(qtbot, tab, TONE)  # KV cache on (the default)
    on_steps, on_ms = tab.strip.series("ms")
    assert len(on_steps) > 3 and np.allclose(on_ms, 4.0)
    _run(qtbot, tab, DecodingOptions(kv_cache=False))
    strip = tab.strip
    steps, ms = strip.series("ms")
    assert ms[-1] > ms[0]  # the cache-off run grows
    ref = strip.reference()
    assert ref is not None, "the cache-on run is not kept beside the cache-off run"
    on, rsteps, rms = ref
    assert on is True and list(rsteps) == list(on_steps) and np.allclose(rms, on_ms)
    strip.flush()
    assert strip.ref_curve.isVisible()
    # one y scale: the reference's 4 ms sits at 4 / max(cache-off ms) of the height
    _x, ry = strip.ref_curve.getData()
    _x, cy = strip.curves["ms"].getData()
    assert np.isclose(ry[0], 4.0 / ms.max()) and np.isclose(cy[-1], 1.0)
    legend = strip.legend_text()
    assert "KV cache off" in legend and "KV cache on" in legend
    assert w.grab().save(str(tmp_path / "01_strip_kv_on_off_1280.png"))
    # back on: the cache-off run becomes the reference
    _run(qtbot, tab, DecodingOptions(kv_cache=True))
    assert strip.reference()[0] is False
    # another input: the reference is dropped
    decoded(qtbot, tab, TONE[::-1].copy(), "tone reversed")
    strip.flush()
    assert strip.reference() is None and not strip.ref_curve.isVisible()
    assert "KV cache" not in strip.legend_text()
    tab.shutdown()


def _noise_wav(path, seconds: float):
    import soundfile as sf

    rng = np.random.default_rng(1)
    sf.write(path, (0.1 * rng.standard_normal(int(16000 * seconds))).astype(np.float32), 16000)
    return path


def test_during_a_live_session_the_views_say_they_show_the_last_offline_run(qtbot, settings, monkeypatch,
                                                                           tmp_path):
    """Before: while a file played as live input (and after), the token stream, top-k and heatmap
    still showed the previous offline run, of another input, unmarked: a user read them as the
    live decode. And the input label "Playing spee…" lost its seconds count at 1280 px."""
    import gui.tabs.live as live_mod

    from .test_live_mode import ScriptedDecoder

    monkeypatch.setattr(live_mod.LiveMode, "make_decoder", lambda self, model, options: ScriptedDecoder())
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    tab.options_panel._timer.setInterval(20)
    tab.model = FakeSpeechModel()
    decoded(qtbot, tab, TONE)
    assert not tab.stream.earlier_note.isVisible() and "offline" not in tab.topk.title_text()
    played = _noise_wav(tmp_path / "speech_recording_with_a_long_name.wav", 3.0)
    assert tab.play_file_as_live(played, speed=2.0)
    live = tab.live_mode
    qtbot.waitUntil(lambda: live.view.heard_s > 0.8, timeout=10_000)
    qtbot.wait(300)
    note = tab.stream.earlier_note
    assert note.isVisible() and "last offline run: tone" in note.text() and "Live view" in note.text()
    assert tab.stream.flow.graphicsEffect() is not None  # dimmed
    assert tab.topk.title_text().startswith("Last offline run (tone)")
    assert "last offline run: tone" in tab.heatmap.earlier_note.text()
    assert len(tab.run) > 0  # the run itself stays
    label = tab.input_area.info_label
    shown = label.shown_text()
    assert re.match(r"^\d+\.\d s", shown), shown  # the count is what is seen first
    assert "playing speech_recording" in label.text()
    assert w.grab().save(str(tmp_path / "02_live_marks_last_offline_run_1280.png"))
    with qtbot.waitSignal(tab.decodeFinished, timeout=20_000):  # the file is decoded offline after the stream
        qtbot.waitUntil(lambda: not live.running(), timeout=20_000)
    qtbot.wait(50)
    assert not tab.stream.earlier_note.isVisible() and tab.stream.flow.graphicsEffect() is None
    assert "offline" not in tab.topk.title_text() and not tab.heatmap.earlier_note.isVisible()
    tab.shutdown()


def test_partial_utf8_tokens_are_listed_as_their_bytes(qtbot, whisper_tiny_en, tmp_path):
    """Before: whisper's byte-level BPE token "âĢ" (the first two bytes of "—", E2 80) was listed
    in the top-k chart and the token stream's tooltip as "\ufffd"."""
    from core.events import TokenProb
    from gui.tabs.speech import SpeechTab
    from gui.widgets.token_flow import format_tooltip

    backend = whisper_tiny_en.backend
    partial = backend.tokenizer.convert_tokens_to_ids("âĢ")
    space_e2 = backend.tokenizer.convert_tokens_to_ids("Ġâ")
    assert backend.token_text(partial) == "\ufffd"  # the text the engine reports (and joins) stays
    tab = SpeechTab()
    qtbot.addWidget(tab)
    tab.model = whisper_tiny_en
    tops = [TokenProb(partial, "\ufffd", 0.5), TokenProb(space_e2, " \ufffd", 0.3), TokenProb(851, " —", 0.2)]
    ev = StepEvent(3, partial, "\ufffd", 0.5, 0.4, tops, tops, 1.0, raw_entropy=1.0)
    tab.topk.set_step(ev)
    texts = tab.topk.row_texts()
    assert texts[:3] == ["<0xE2><0x80>", "<0xE2>", "—"], texts
    tip = format_tooltip(ev, token_bytes=tab.stream.flow.token_bytes)
    assert "step 3: '<0xE2><0x80>'" in tip and "' <0xE2>'" in tip and "\ufffd" not in tip
    tab.stream.flow.append_many([ev])
    assert tab.stream.flow.chip_text(3) == "<0xE2><0x80>"
    tab.resize(1280, 800)
    tab.show()
    assert tab.topk.grab().save(str(tmp_path / "04_topk_byte_tokens.png"))
    tab.shutdown()


def test_a_translations_end_does_not_leave_its_sentence_progress_on_the_status_bar(qtbot, settings):
    """Before: decodeFinished fired while the status bar still said "Decoding sentence 4 of 4…"
    with its progress bar at 3 of 4 (the worker's end, which clears them, comes after the run's
    Finished event); H5 saw "sentence 2 of 4"."""
    w = shown_window(qtbot, settings)
    tab = w.translation_tab
    w.tabs.setCurrentWidget(tab)
    tab.options_panel._timer.setInterval(20)
    tab._text_timer.setInterval(50)
    with qtbot.waitSignal(tab.modelReady, timeout=120_000):
        tab.load_model("en-pt")
    qtbot.waitUntil(lambda: not tab.is_busy(), timeout=120_000)
    seen, at_finish = [], []
    tab.busyChanged.connect(lambda busy, message: seen.append(message))
    tab.decodeFinished.connect(lambda ev: at_finish.append((w.busy_label.text(), tab.busy_message, tab.progress)))
    text = ("The weather is nice today. Where is the train station? I would like a cup of coffee, please. "
            "We will meet again tomorrow morning.")
    with qtbot.waitSignal(tab.decodeFinished, timeout=120_000):
        tab.set_text(text)
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=120_000)
    assert any("sentence 4 of 4" in m for m in seen), seen  # the progress was shown while decoding
    label, message, progress = at_finish[0]
    assert "sentence" not in label and "sentence" not in message and progress is None, at_finish
    qtbot.waitUntil(lambda: not w.busy_bar.isVisible(), timeout=5000)
    assert w.busy_label.text() == "" and w.statusBar().currentMessage().startswith("Decoded:")
    tab.shutdown()
