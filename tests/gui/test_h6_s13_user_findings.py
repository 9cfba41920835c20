"""Session 13, H6: the defects H5's click-through at 1280x800 left (/work/notes/s13/h5/), each as a
test that failed before its fix: the KV cache on/off comparison in the step strip, the views of
the previous offline run during a live session, the live input label, byte tokens' text, and
the translation's status bar at its end."""

from __future__ import annotations

import dataclasses

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


def test_the_step_strip_keeps_the_other_kv_cache_settings_run_as_a_reference(qtbot, settings):
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
    w.grab().save("/work/notes/s13/h6/01_strip_kv_on_off_1280.png")
    # back on: the cache-off run becomes the reference
    _run(qtbot, tab, DecodingOptions(kv_cache=True))
    assert strip.reference()[0] is False
    # another input: the reference is dropped
    decoded(qtbot, tab, TONE[::-1].copy(), "tone reversed")
    strip.flush()
    assert strip.reference() is None and not strip.ref_curve.isVisible()
    assert "KV cache" not in strip.legend_text()
    tab.shutdown()
