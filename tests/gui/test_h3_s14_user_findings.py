"""Session 14, H3: the two defects session 13's user trial left, each as a test that failed
before its fix: the step strip's KV cache labels after Edit → Previous exploration (Ctrl+Z), and
the "last offline run" mark of the views after a live session that ended without an offline run."""

from __future__ import annotations

import re

import numpy as np
import pytest

from core.options import DecodingOptions

from .fakes import VOCAB, FakeSpeechModel
from .tab_helpers import FELL_BEHIND, TONE, decoded, show_session_lines, shown_window
from .test_h6_s13_user_findings import TimedFakeSpeechModel, _run


@pytest.fixture(autouse=True)
def _answers(monkeypatch):
    """Every Save / Discard / Cancel question is answered "discard" (a window left with a fork
    asks when qtbot closes it)."""
    import gui.tabs.speech as speech_mod

    monkeypatch.setattr(speech_mod, "ask_unsaved", lambda parent, text, informative, title="": "discard")


def test_ctrl_z_gives_the_step_strip_the_restored_trees_kv_cache_setting(qtbot, settings, tmp_path):
    """Before: after a cache-on tree with a fork and a cache-off run, Ctrl+Z brought the cache-on
    tree back but the strip kept the cache-off run's setting: its solid curve (the restored
    cache-on run) was labelled "KV cache off", and the dashed reference was the restored run itself
    ("KV cache on"), so the comparison the user had made was gone and mislabelled."""
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    tab.options_panel._timer.setInterval(20)
    tab.model = TimedFakeSpeechModel()
    decoded(qtbot, tab, TONE)  # KV cache on (the default)
    with qtbot.waitSignal(tab.forkFinished, timeout=5000):
        assert tab.fork(3, [VOCAB[" cat"]], " cat")  # work: the tree is kept for Ctrl+Z
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    _run(qtbot, tab, DecodingOptions(kv_cache=False))
    strip = tab.strip
    _steps, off_ms = strip.series("ms")
    assert off_ms[-1] > off_ms[0] and strip.reference()[0] is True
    assert tab.explorations_keeper.previous()
    qtbot.wait(50)
    assert tab.options_panel.options().kv_cache is True  # the restored tree's options
    _steps, ms = strip.series("ms")
    assert len(ms) and np.allclose(ms[np.isfinite(ms)], 4.0)  # the strip shows the cache-on run
    legend = strip.legend_text()
    assert re.search(r"━ KV cache on ", legend), legend  # the solid curve: the run shown
    assert re.search(r"┅ KV cache off", legend), legend  # the dashed one: the cache-off run it replaced
    ref = strip.reference()
    assert ref is not None and ref[0] is False and np.allclose(ref[2][np.isfinite(ref[2])], off_ms[np.isfinite(off_ms)])
    assert w.grab().save(str(tmp_path / "01_ctrl_z_strip_kv_labels_1280.png"))
    # Ctrl+Shift+Z: the cache-off run is shown again, the cache-on run its reference
    assert tab.explorations_keeper.next()
    qtbot.wait(50)
    assert strip.reference() is not None and strip.reference()[0] is True
    assert re.search(r"━ KV cache off ", strip.legend_text()), strip.legend_text()
    tab.shutdown()


def test_a_live_session_that_ends_without_an_offline_run_unmarks_the_views(qtbot, settings, tmp_path, monkeypatch):
    """Before: a file played as live input that could not be read ended the session with an error,
    and the token stream, top-k and heatmap stayed dimmed with "last offline run: tone — live decode
    is in the Live view" although nothing was live and they showed the run of the input shown, until
    the next offline run."""
    import gui.tabs.live as live_mod

    from .test_live_mode import ScriptedDecoder

    monkeypatch.setattr(live_mod.LiveMode, "make_decoder", lambda self, model, options: ScriptedDecoder())
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    tab.options_panel._timer.setInterval(20)
    tab.model = FakeSpeechModel()
    errors = []
    tab.errorOccurred.connect(errors.append)
    decoded(qtbot, tab, TONE)
    bad = tmp_path / "not_audio.wav"
    bad.write_bytes(b"this is not a wav file" * 100)
    live = tab.live_mode
    assert tab.play_file_as_live(bad, speed=2.0)
    qtbot.waitUntil(lambda: not live.running(), timeout=10_000)
    qtbot.wait(50)
    assert any("Live decoding stopped" in e for e in errors), errors
    assert not tab.stream.earlier_note.isVisible() and tab.stream.flow.graphicsEffect() is None
    assert "offline" not in tab.topk.title_text() and not tab.heatmap.earlier_note.isVisible()
    assert len(tab.run) > 0  # the run of the input shown stays
    assert w.grab().save(str(tmp_path / "02_live_failed_file_unmarked_1280.png"))
    tab.shutdown()


def test_a_speculative_run_that_drafted_nothing_shows_no_acceptance_rate(qtbot):
    """Before: tiny.en with the n-gram draft on the sample (no repeated n-gram: nothing drafted) said
    "α 0.00 (0/0)" in the Speculation tab and "α 0.00 · speed-up 1.11×" on the status bar, read as "the
    target rejected every drafted token" and "speculation sped it up", when nothing was drafted and the
    run decoded as plain greedy does (the 1.11× is the two runs' timing noise)."""
    from core.events import Finished, RunStats, SpeculationSummary
    from gui.main_window import speculation_status
    from gui.run_state import RunState
    from gui.widgets.speculation_view import SpeculationView

    from .fakes import make_step

    spec = SpeculationSummary(draft="ngram", rounds=5, draft_tokens=0, accepted=0, tokens=5, c=0.05,
                              speedup_predicted=None, speedup_measured=1.11)
    status = speculation_status(spec.to_dict())
    assert "α 0.00" not in status and "nothing drafted" in status, status
    run = RunState()
    view = SpeculationView(run)
    qtbot.addWidget(view)
    view.resize(900, 320)
    view.show()
    steps = [make_step(i, w) for i, w in enumerate([" a", " b", " c", " d", " e"])]
    for ev in steps:
        run.add(ev)
    run.finish(Finished(text="".join(e.text for e in steps), token_ids=[e.token_id for e in steps],
                        stats=RunStats(decode_s=0.1, n_tokens=5, speculative=spec)))
    run.flush()
    view.refresh()
    text = view.run_label.text()
    assert "α 0.00" not in text and "nothing drafted" in text, text


def test_the_logit_lens_outlines_the_selected_step_after_capture_re_decodes(qtbot, settings):
    """Before: with a step selected (tiny.en on the sample, step 3 ' and'), ticking Capture decoded the
    run again with the lens; the token stream, strip and top-k kept step 3 selected, but the lens grid
    outlined no column and scrolled to the newest steps (its own handler of the run's steps forgot
    the selection that outlives a run, which the other views take back when the step arrives)."""
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    tab.options_panel._timer.setInterval(20)
    tab.model = FakeSpeechModel()
    decoded(qtbot, tab, TONE)
    tab.run.select(3)
    tab.inspector_tabs.setCurrentWidget(tab.lens_view)
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.lens_view.capture_box.setChecked(True)
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    qtbot.wait(50)
    grid = tab.lens_view.grid
    assert tab.run.selected() == 3 and tab.lens_view.column_count() > 3
    assert grid.selected == 3, "the lens outlines no column although step 3 is selected"
    first, last = grid.visible_columns()
    assert first <= grid.col_of[3] < last
    tab.shutdown()


def test_the_live_views_legend_gets_the_height_of_its_wrapped_lines_at_1280(qtbot, settings, tmp_path):
    """Before: at 1280x800 the Live view's legend wraps to two lines but its column (laid out without
    height-for-width) gave it one line's height: the first line was drawn over the lane's axis title
    ("stream time (s)") and the second ("■▼ AlignAtt: too close to the end…") was cut in half."""
    w = shown_window(qtbot, settings)
    tab = w.speech_tab
    view = tab.live_mode.view
    tab.inspector_tabs.bring(view)
    live = tab.live_mode  # under align-att, whose marks make the legend two lines (session 15)
    live.policy_combo.setCurrentIndex(live.policy_combo.findData("align-att:25"))
    # as in a session that fell behind (tiny.en, the sample played as live input at 3x)
    show_session_lines(view, "RTF 0.23 · latency mean 3.18 s / p90 4.32 s · 3 of 24 tentative tokens revised",
                       FELL_BEHIND)
    qtbot.wait(100)
    legend = view.legend
    need = legend.heightForWidth(legend.width())
    assert need > legend.fontMetrics().lineSpacing() * 1.5  # it wraps at this width
    assert legend.height() >= need, f"the legend has {legend.height()} px for {need} px of wrapped text"
    lane = view.lane.geometry()
    assert legend.geometry().top() > lane.bottom(), f"the legend {legend.geometry()} is drawn over the lane {lane}"
    assert view.grab().save(str(tmp_path / "03_live_view_legend_1280.png"))
    tab.shutdown()
