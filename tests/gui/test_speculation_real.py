"""Speculative decoding of a real input in the Speech tab (issue 21, "Done when": a GUI test
drafts on a real input and checks that the marks in the stream match the rounds in the
trace). The bundled speech clip through whisper tiny.en (the session fixture), decoded by the
tab's worker; the trace is the same decode called directly on the model."""

from __future__ import annotations

import pytest

from core.events import Finished, SpeculationRound, StepEvent
from core.inputs.audio import open_audio
from core.options import DecodingOptions
from gui.tabs.speech import SpeechTab, first_sample
from gui.widgets.speculation_marks import rejected_token

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("one_torch_thread")]

SLOW_MS = 240_000


def _decode(qtbot, tab, audio, options):
    tab.options_panel.setOptions(options)
    with qtbot.waitSignal(tab.decodeFinished, timeout=SLOW_MS) as blocker:
        tab.set_audio(audio, "sample")
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=SLOW_MS)
    tab.flush_views()
    return blocker.args[0]


def _expected_marks(rounds: list[SpeculationRound]) -> dict[int, str]:
    """step -> mark, as the rounds say: the accepted prefix, then the target's own token."""
    marks = {}
    for r in rounds:
        for j in range(r.n_accepted):
            marks[r.step + j] = "accepted"
        if r.emitted_kind:
            marks[r.step + r.n_accepted] = r.emitted_kind
    return marks


# not ngram: it looks up n >= 2 in the own ids, and nothing repeats on the clip, so it drafts nothing there
@pytest.mark.parametrize("draft", ["early-exit:2", "early-exit:3"])
def test_marks_in_the_stream_match_the_rounds_of_the_trace(qtbot, whisper_tiny_en, draft):
    audio = open_audio(first_sample()).audio
    tab = SpeechTab()
    qtbot.addWidget(tab)
    tab.model = whisper_tiny_en
    options = DecodingOptions(strategy="speculative", draft=draft)
    fin = _decode(qtbot, tab, audio, options)
    assert not fin.cancelled and fin.stats.speculative is not None
    assert tab.inspector_tabs.isTabVisible(tab.inspector_tabs.indexOf(tab.speculation_view))

    # the trace: the same decode, called on the model directly
    source, settings = tab.task_input("decode").call_args(rerun=False)
    trace = list(whisper_tiny_en.decode(source, options, **settings))
    steps = [e for e in trace if isinstance(e, StepEvent)]
    rounds = [e for e in trace if isinstance(e, SpeculationRound)]
    assert rounds, "the draft proposed nothing on the clip: the test would check nothing"
    assert next(e for e in trace if isinstance(e, Finished)).token_ids == fin.token_ids

    # the stream's chips carry the trace's marks, and those are what its rounds say
    shown = tab.stream.flow.steps()
    assert [ev.token_id for ev in shown] == [ev.token_id for ev in steps]
    assert [ev.speculation for ev in shown] == [ev.speculation for ev in steps]
    expected = _expected_marks(rounds)
    assert {ev.step: ev.speculation for ev in shown if ev.speculation} == expected
    # one struck-through ghost per rejection, after the token the target emitted in its place (after
    # the last token when the target ended the text there)
    want_ghosts = [r.step + r.n_accepted - (r.emitted_id is None) for r in rounds if rejected_token(r) is not None]
    assert [s for s, _t in tab.stream.flow.ghosts()] == want_ghosts
    assert [(r.step, r.n_accepted, [t.id for t in r.drafted]) for r in tab.run.rounds()] == \
        [(r.step, r.n_accepted, [t.id for t in r.drafted]) for r in rounds]

    # the Speculation tab: the run's figures are the trace's, a selected step shows its round
    view = tab.speculation_view
    view.refresh()
    f = view.figures()
    assert f["rounds"] == len(rounds) and f["accepted"] == sum(r.n_accepted for r in rounds)
    assert f["drafted"] == sum(len(r.drafted) for r in rounds)
    r = rounds[0]
    tab.select_step(r.step + r.n_accepted)
    assert view.shown_round().step == r.step and len(view.rows()) == len(r.drafted) + bool(r.emitted_kind)
    # the short run was timed against plain greedy on the same input: the measured speed-up
    speedup = tab.last_stats["speculative"]["speedup_measured"]
    assert speedup is not None and speedup > 0 and f"speed-up {speedup:.2f}×" in view.run_label.text()
    # greedy verification: the same tokens as greedy search
    greedy = [e.token_id for e in whisper_tiny_en.decode(source, DecodingOptions(), **settings)
              if isinstance(e, StepEvent)]
    assert greedy == fin.token_ids
    tab.shutdown()
