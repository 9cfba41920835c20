"""Speculative decoding in the window (issue 21, "The view"): RunState keeps the rounds per
branch, the token stream marks accepted / resampled / bonus tokens and shows the rejected
drafts struck through, the Speculation inspector tab lists a round and sums up the run, the
status bar gives α and the speed-up. Synthetic events (tests/gui/fakes_speculation.py)."""

from __future__ import annotations

import dataclasses

import pytest

from core.events import SegmentEvent, SpeculationRound, StepEvent
from gui.run_state import RunState

from .fakes import WORDS
from .fakes_speculation import ROUNDS, rejected_text, speculative_events


def _feed(run: RunState, events) -> None:
    for ev in events:
        if isinstance(ev, StepEvent):
            run.add(ev)
        elif isinstance(ev, SpeculationRound):
            run.add_round(ev)
        elif isinstance(ev, SegmentEvent):
            run.add_segment(ev)


def test_run_state_keeps_rounds_per_frame_per_branch_and_retracts_them(qtbot):
    run = RunState()
    got: list = []
    order: list[str] = []
    run.roundsAdded.connect(lambda b, rounds: (got.extend(rounds), order.append("rounds")))
    run.stepsAdded.connect(lambda b, steps: order.append("steps"))
    events = speculative_events()
    _feed(run, events)
    assert got == [] and run.pending()  # nothing before the frame
    run.flush()
    assert order == ["steps", "rounds"]  # one signal each per frame, the steps first
    rounds = [e for e in events if isinstance(e, SpeculationRound)]
    assert got == rounds and run.rounds() == rounds
    # every speculative step finds the round that emitted it
    for ev in run.steps():
        r = run.round_of(ev.step)
        assert r is not None and r.step <= ev.step <= r.step + r.n_accepted
    assert run.round_of(99) is None
    # a fork at step 5 (round 1's resampled token) keeps the parent's rounds before it only
    run.fork(0, 5, [123], " cat")
    b = run.growing_branch()
    assert [r.round for r in run.branch_rounds(b)] == [0, 1]
    forked = speculative_events(WORDS[:6], ((3, 3, "bonus"), (2, 1, "resampled")), step_offset=5)
    _feed(run, forked)
    own = [r for r in run.branch_rounds(b) if r.step >= 5]
    assert [r.step for r in own] == [5, 9] and run.branch_round_of(b, 6).step == 5
    assert run.branch_round_of(0, 6).round == 2  # the parent's own
    # a long-form attempt taken back takes its rounds with it
    run.set_growing(0)
    n = run.retract(0, 6)
    assert n == 5 and [r.round for r in run.branch_rounds(0)] == [0, 1]
    assert len(ROUNDS) == 4 and rejected_text(1) == " wrong1"


def test_complete_from_parent_renumbers_the_later_segments_rounds(qtbot):
    run = RunState()
    seg0 = speculative_events(WORDS[:4], ((3, 3, "bonus"),))
    seg1 = speculative_events(WORDS[:4], ((3, 1, "resampled"), (1, 1, "bonus")), segment=1, step_offset=4)
    _feed(run, seg0 + seg1)
    run.fork(0, 2, [123], " cat")
    b = run.growing_branch()
    # the fork decodes segment 0 again: 3 tokens from step 2 (one more than the parent had)
    _feed(run, [dataclasses.replace(e, step=e.step + 2) if isinstance(e, (StepEvent, SpeculationRound)) else e
                for e in speculative_events(WORDS[:3], ((2, 2, "bonus"),))])
    assert run.complete_from_parent(b) == 4
    later = [r for r in run.branch_rounds(b) if r.segment == 1]
    assert [r.step for r in later] == [5, 7]  # was 4, 6
    assert run.branch_round_of(b, 8).step == 7


def _stream_with_run(qtbot, events, width=900):
    from gui.widgets.token_stream import TokenStreamView

    run = RunState()
    view = TokenStreamView(run)
    qtbot.addWidget(view)
    view.resize(width, 300)
    view.show()
    _feed(run, events)
    run.flush()
    return run, view


def test_stream_marks_speculative_tokens_and_shows_rejected_drafts_struck_through(qtbot):
    events = speculative_events()
    run, view = _stream_with_run(qtbot, events)
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert view.token_count() == len(steps) == len(WORDS)
    # one ghost per round with a rejection, right after the token emitted in its place
    assert [s for s, _t in view.flow.ghosts()] == [5, 6]
    assert [t.strip("␣ ") for _s, t in view.flow.ghosts()] == [rejected_text(1).strip(), rejected_text(2).strip()]
    for step in (5, 6):
        chip, ghost = view.flow.chip_rect(step), view.flow.ghost_rect(step)
        assert ghost is not None and (ghost.left() > chip.right() or ghost.top() > chip.top())
        nxt = view.flow.chip_rect(step + 1)
        if nxt is not None:  # the next token comes after the ghost
            assert nxt.left() > ghost.right() or nxt.top() > ghost.top()
    assert not view.spec_legend.isHidden() and "resampled" in view.spec_legend.toolTip()
    # the ghost's tooltip gives the draft's numbers and what the target chose instead
    from gui.widgets.speculation_marks import ghost_tooltip, rejected_token

    r1 = [e for e in events if isinstance(e, SpeculationRound)][1]
    tip = ghost_tooltip(r1, rejected_token(r1))
    assert "min(1, p/q) 0.250" in tip and "u 0.70" in tip and repr(WORDS[5]) in tip and "' later2'" in tip
    # the chips' tooltips define their mark
    from gui.widgets.token_flow import format_tooltip

    assert "accepted" in format_tooltip(steps[0]) and "bonus" in format_tooltip(steps[3])
    assert "resampled" in format_tooltip(steps[5]) and "speculative" not in format_tooltip(
        dataclasses.replace(steps[0], speculation="", spec_round=-1))


def test_stream_ghosts_survive_a_replay_and_rounds_arriving_a_frame_late(qtbot):
    events = speculative_events()
    # the last round arrives one frame after its steps (a pump turn cut by its budget)
    run, view = _stream_with_run(qtbot, events[:-1])
    assert [s for s, _t in view.flow.ghosts()] == [5, 6]
    run.add_round(events[-1])
    run.flush()
    assert [s for s, _t in view.flow.ghosts()] == [5, 6]  # the last round had no rejection
    # a branch switch replays the stream from the run: the ghosts come back, once each
    run.fork(0, 8, [123], " cat")
    run.set_current(run.growing_branch())
    run.set_current(0)
    assert [s for s, _t in view.flow.ghosts()] == [5, 6] and view.token_count() == len(WORDS)
    view.add_rounds(run.rounds())  # idempotent
    assert [s for s, _t in view.flow.ghosts()] == [5, 6]
    # a plain run shows no legend and no ghost
    run.clear()
    plain = [dataclasses.replace(e, speculation="", spec_round=-1) for e in events if isinstance(e, StepEvent)]
    _feed(run, plain)
    run.flush()
    assert view.flow.ghosts() == [] and view.spec_legend.isHidden()


def _view_with_run(qtbot, events):
    from gui.widgets.speculation_view import SpeculationView

    run = RunState()
    view = SpeculationView(run)
    qtbot.addWidget(view)
    view.resize(900, 320)
    view.show()
    _feed(run, events)
    run.flush()
    view.refresh()
    return run, view


def test_speculation_tab_lists_the_selected_steps_round_and_sums_up_the_run(qtbot):
    from .fakes_speculation import finished

    events = speculative_events()
    run, view = _view_with_run(qtbot, events)
    rounds = [e for e in events if isinstance(e, SpeculationRound)]
    assert view.shown_round() is rounds[-1]  # nothing selected: the newest step's round
    run.select(5)  # round 1's resampled token
    assert view.shown_round() is rounds[1]
    rows = view.rows()
    assert [r[6] for r in rows] == ["accepted", "rejected", "not judged", "resampled"]
    assert rows[1][1:6] == ("wrong1", "0.800", "0.200", "0.250", "0.700")  # token, q, p, min(1, p/q), u
    assert rows[3][0] == "▶" and rows[3][1] == WORDS[5].strip()
    assert "norm(max(0, p − q))" in view.residual_label.text() and "0.700" in view.residual_label.text()
    assert "Round 1" in view.round_label.text() and "target 21.0 ms" in view.round_label.text()
    # clicking the accepted row selects its step; the target's own row selects the resampled step
    with qtbot.waitSignal(view.stepSelected) as blocker:
        view.table.cellClicked.emit(0, 1)
    assert blocker.args == [4]
    with qtbot.waitSignal(view.stepSelected) as blocker:
        view.table.cellClicked.emit(3, 1)
    assert blocker.args == [5]
    # over the run: α, tokens per target call, acceptance by position, γ per round
    f = view.figures()
    assert (f["drafted"], f["accepted"], f["rounds"], f["tokens"]) == (11, 7, 4, 11)
    assert abs(f["alpha"] - 7 / 11) < 1e-12 and f["tokens_per_call"] == 11 / 4
    assert list(f["by_position"][0]) == [4, 4, 3] and list(f["by_position"][1]) == [3, 2, 2]
    assert list(f["gammas"]) == [3, 3, 2, 3] and list(f["accepted_per_round"]) == [3, 1, 0, 3]
    assert "α 0.64" in view.run_label.text() and "2.75 tokens per drafted round" in view.run_label.text()
    assert "when the run has finished" in view.run_label.text()
    # the finished run's measured and predicted speed-up
    run.finish(finished(events))
    view.refresh()
    assert "speed-up 1.60×" in view.run_label.text() and "1.80× predicted" in view.run_label.text()
    assert "2.75 tokens/call</b> · 4 calls, 4 with a draft" in view.run_label.text()
    # a plain step says so; a new run empties the table
    run.add(dataclasses.replace(events[0], step=11, speculation="", spec_round=-1))
    run.flush()
    run.select(11)
    assert view.shown_round() is None and "not decoded speculatively" in view.round_label.text()
    run.clear()
    view.refresh()
    assert view.rows() == [] and view.figures()["rounds"] == 0


def test_greedy_verification_rows_have_no_draw_and_the_residual_is_the_targets_top_k(qtbot):
    events = speculative_events(sampling=False)
    run, view = _view_with_run(qtbot, events)
    run.select(6)  # round 2: nothing accepted, the first drafted token rejected
    rows = view.rows()
    assert [r[5] for r in rows[:2]] == ["–", "–"] and [r[6] for r in rows] == ["rejected", "not judged", "resampled"]
    assert "top-k" in view.residual_label.text()


def test_status_bar_gives_acceptance_and_speedup():
    from gui.main_window import speculation_status
    from gui.tabs.run_stats import LiveCount, stats_dict

    from .fakes_speculation import finished

    d = stats_dict(None, finished(speculative_events()), LiveCount(), lambda: False)
    assert speculation_status(d["speculative"]) == " · α 0.64 · speed-up 1.60× (predicted 1.80×)"
    assert speculation_status(None) == ""


def test_a_decode_hands_rounds_to_the_stream_and_the_speculation_tab(qtbot):
    """Through the run tab's controller: the rounds reach the views with their steps."""
    import numpy as np

    from gui.tabs.speech import SpeechTab

    from .fakes import FakeSpeechModel
    from .fakes_speculation import finished

    events = speculative_events()
    tab = SpeechTab()
    qtbot.addWidget(tab)
    tab.model = FakeSpeechModel()
    tab.decode_fn = lambda options: (lambda cancel: iter([*events, finished(events)]))
    tab.show_speculation(True)
    assert tab.inspector_tabs.currentWidget() is tab.speculation_view
    audio = (0.1 * np.sin(np.arange(16000) / 16000 * 2 * np.pi * 220)).astype(np.float32)
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.set_audio(audio, "tone")
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=5000)
    assert [s for s, _t in tab.stream.flow.ghosts()] == [5, 6]
    assert len(tab.run.rounds()) == 4
    tab.speculation_view.refresh()
    assert tab.speculation_view.figures()["rounds"] == 4 and "speed-up 1.60×" in tab.speculation_view.run_label.text()
    assert tab.last_stats.get("speculative", {}).get("speedup_measured") == 1.6
    tab.speculation_view.table.cellClicked.emit(0, 1)  # the newest round's first row
    assert tab.run.selected() == 7
    tab.show_speculation(False)
    assert not tab.inspector_tabs.isTabVisible(tab.inspector_tabs.indexOf(tab.speculation_view))
    tab.shutdown()


def test_options_panel_offers_speculative_with_its_draft_draft_tokens_and_verification(qtbot, tmp_path):
    from core.options import DecodingOptions
    from gui.widgets.options_panel import OptionsPanel

    panel = OptionsPanel(debounce_ms=20, presets_dir=tmp_path / "presets")
    qtbot.addWidget(panel)
    panel.show()
    draft, verification = panel.choices["draft"], panel.choices["verification"]
    assert not draft.isVisible()  # shown for speculative decoding only
    with qtbot.waitSignal(panel.optionsChanged) as blocker:
        panel.strategy_buttons["speculative"].click()
    o = blocker.args[0]
    assert o.strategy == "speculative" and o.draft == "ngram" and o.draft_tokens == 0 and o.verification == "greedy"
    assert draft.isVisible() and verification.isVisible() and panel.controls["draft_tokens"].isVisible()
    assert panel.controls["draft_tokens"].spin.specialValueText() == "auto"
    for w in (draft, verification, panel.controls["draft_tokens"]):  # every control says what it is
        assert len(w.toolTip()) > 40
    assert "Leviathan" in panel.strategy_buttons["speculative"].toolTip()
    # greedy verification: the filters and the seed are not used; sampling verification uses them
    assert not panel.seed_spin.isEnabled() and not panel.controls["temperature"].isEnabled()
    with qtbot.waitSignal(panel.optionsChanged) as blocker:
        verification.setCurrentIndex(verification.findData("sample"))
    assert blocker.args[0].verification == "sample"
    assert panel.seed_spin.isEnabled() and panel.controls["temperature"].isEnabled()
    with qtbot.waitSignal(panel.optionsChanged) as blocker:
        draft.setCurrentText("early-exit:3")
        panel.controls["draft_tokens"].setValue(4)
    assert (blocker.args[0].draft, blocker.args[0].draft_tokens) == ("early-exit:3", 4)
    assert "speculative" in panel.sections["Strategy"].summary.text()
    assert "early-exit:3" in panel.sections["Strategy"].summary.text()
    # a misspelt draft is an error the panel shows, not a crash
    draft.setCurrentText("early-exit:x")
    qtbot.waitUntil(lambda: panel.error_label.isVisible(), timeout=2000)
    assert "early-exit" in panel.error_label.text()
    # the options round-trip into the controls
    panel.setOptions(DecodingOptions(strategy="speculative", draft="model:tiny.en", draft_tokens=3,
                                     verification="sample"))
    assert draft.currentText() == "model:tiny.en" and verification.currentData() == "sample"
    assert panel.options().draft_tokens == 3
    panel.strategy_buttons["greedy"].click()
    assert not draft.isVisible()


def test_a_draft_rejected_for_the_end_of_text_follows_the_last_token(qtbot):
    """The target ended the text where the draft went on: no token at that position, so
    the ghost follows the last token — after the ghost already there (two rounds, one chip)."""
    from core.events import DraftToken

    events = speculative_events()
    cut = [e for e in events if not (getattr(e, "step", 0) >= 7)]  # rounds 0-2: steps 0..6
    eos = SpeculationRound(round=3, step=7, segment=0, gamma=2, n_accepted=0, emitted_id=None, emitted_text="",
                           emitted_kind="", drafted=(DraftToken(5, " more", 1.0, 0.0, 0.0, None, False),
                                                     DraftToken(6, " text", 1.0, 0.0, 0.0, None, False, False)))
    run, view = _stream_with_run(qtbot, cut + [eos])
    assert [(s, t) for s, t in view.flow.ghosts()] == [(5, "wrong1"), (6, "wrong2"), (6, "more")]
    r5, r6 = view.flow.chip_rect(5), view.flow.ghost_rect(6)
    assert r6 is not None and r5 is not None
    from gui.widgets.speculation_marks import ghost_tooltip

    assert "ended the text" in ghost_tooltip(eos, eos.drafted[0])
    view.add_rounds([eos])  # placed again: replaced, not doubled
    assert len(view.flow.ghosts()) == 3
    run.fork(0, 2, [123], " cat")  # a replay (another branch, then back) redraws every ghost
    run.set_current(run.growing_branch())
    assert view.flow.ghosts() == []
    run.set_current(0)
    assert [(s, t) for s, t in view.flow.ghosts()] == [(5, "wrong1"), (6, "wrong2"), (6, "more")]
    from gui.widgets.speculation_view import SpeculationView

    spec = SpeculationView(run)
    qtbot.addWidget(spec)
    spec.show_round(eos)
    assert [r[6] for r in spec.rows()] == ["rejected", "not judged", "end"]


def _speculative_tab(qtbot, plain_delay_s: float = 0.0):
    """A Speech tab whose decode gives the fake speculative run for strategy speculative and
    a plain run twice as slow per token (0.4 s for 11 tokens) otherwise."""
    import time

    import numpy as np

    from core.events import Finished, RunStats
    from core.options import DecodingOptions
    from gui.tabs.speech import SpeechTab

    from .fakes import FakeSpeechModel
    from .fakes_speculation import finished

    events = speculative_events()
    spec_fin = finished(events)
    spec_fin = dataclasses.replace(spec_fin, stats=dataclasses.replace(
        spec_fin.stats, speculative=dataclasses.replace(spec_fin.stats.speculative, speedup_measured=None)))
    plain = [dataclasses.replace(e, speculation="", spec_round=-1) for e in events if isinstance(e, StepEvent)]
    plain_fin = Finished(spec_fin.text, spec_fin.token_ids, RunStats(decode_s=0.4, n_tokens=len(plain)))
    calls = []

    def decode_fn(options):
        calls.append(options.strategy)
        if options.strategy == "speculative":
            return lambda cancel: iter([*events, spec_fin])

        def gen(cancel):
            for e in plain:
                if plain_delay_s:
                    time.sleep(plain_delay_s)
                if cancel():
                    return
                yield e
            yield plain_fin
        return gen

    tab = SpeechTab()
    qtbot.addWidget(tab)
    tab.model = FakeSpeechModel()
    tab.decode_fn = decode_fn
    tab.options_panel.setOptions(DecodingOptions(strategy="speculative"))
    audio = (0.1 * np.sin(np.arange(16000) / 16000 * 2 * np.pi * 220)).astype(np.float32)
    return tab, audio, calls


def test_a_short_speculative_run_is_timed_against_plain_decoding(qtbot):
    tab, audio, calls = _speculative_tab(qtbot)
    stats = []
    tab.statsChanged.connect(stats.append)
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.set_audio(audio, "tone")
    qtbot.waitUntil(lambda: calls == ["speculative", "greedy"] and not tab.is_busy(), timeout=5000)
    assert tab.run.branch(0).finished.stats.speculative is not None  # the run shown is the speculative one
    assert [ev.speculation for ev in tab.run.steps()][:4] == ["accepted"] * 3 + ["bonus"]
    assert stats[-1]["speculative"]["speedup_measured"] == pytest.approx(2.0)
    from gui.main_window import speculation_status

    assert speculation_status(stats[-1]["speculative"]) == " · α 0.64 · speed-up 2.00× (predicted 1.80×)"
    tab.speculation_view.refresh()
    assert "speed-up 2.00×" in tab.speculation_view.run_label.text()
    assert tab.speculation_view.measure_button.isHidden()
    # the same input and options again: the plain time is known, nothing is decoded twice
    tab.request_decode()
    qtbot.waitUntil(lambda: not tab.is_busy(), timeout=5000)
    assert calls == ["speculative", "greedy", "speculative"]
    tab.shutdown()


def test_esc_stops_the_plain_timing_and_keeps_the_speculative_run(qtbot):
    tab, audio, calls = _speculative_tab(qtbot, plain_delay_s=0.2)
    with qtbot.waitSignal(tab.decodeFinished, timeout=5000):
        tab.set_audio(audio, "tone")
    qtbot.waitUntil(lambda: tab.baseline.running(), timeout=5000)
    assert tab.is_busy()
    assert tab.cancel()
    assert not tab.baseline.running() and "cancelled" in tab.baseline.note
    fin = tab.run.branch(0).finished
    assert not fin.cancelled and fin.stats.speculative is not None and "(cancelled)" not in tab.stream.text()
    qtbot.waitUntil(lambda: not tab.controller.decoding_alive(), timeout=5000)
    tab.speculation_view.refresh()
    assert not tab.speculation_view.measure_button.isHidden()  # measured on request instead
    tab.shutdown()


def test_an_exploration_of_a_speculative_run_saves_and_opens_with_its_rounds(qtbot, tmp_path):
    """The file keeps the summary (RunStats.speculative) and the rounds: the ghosts and the
    Speculation tab come back (it could not be saved at all before: the summary is no JSON)."""
    import json

    from gui import exploration

    from .fakes_speculation import finished

    events = speculative_events()
    run = RunState()
    _feed(run, events)
    run.finish(finished(events))
    data = exploration.to_json(run, task="speech", model="fake", input_description="tone", input_hash="0" * 64)
    path = tmp_path / "spec.json"
    exploration.save(path, data)
    back = exploration.branches_from_json(json.loads(path.read_text()))
    assert back[0].finished.stats.speculative == finished(events).stats.speculative
    assert sorted(back[0].rounds.values(), key=lambda r: r.step) == run.rounds()
    run2, view = _stream_with_run(qtbot, [])
    run2.restore(back)
    assert [s for s, _t in view.flow.ghosts()] == [5, 6] and len(run2.rounds()) == 4


def test_a_broken_round_in_an_exploration_file_is_refused_with_its_field(qtbot):
    from gui import exploration

    from .fakes_speculation import finished

    events = speculative_events()
    run = RunState()
    _feed(run, events)
    run.finish(finished(events))
    data = exploration.to_json(run, task="speech", model="fake", input_description="tone", input_hash="0" * 64)
    data["branches"][0]["rounds"][1]["drafted"] = [["x"]]
    with pytest.raises(exploration.ExplorationError, match=r"branches\[0\]\.rounds"):
        exploration.branches_from_json(data)


def test_a_near_tie_round_marks_its_tokens(qtbot):
    events = speculative_events()
    events = [dataclasses.replace(e, near_tie=True) if isinstance(e, SpeculationRound) and e.round == 1 else e
              for e in events]
    run, view = _stream_with_run(qtbot, events)
    assert sorted(view.flow.notes()) == [4, 5] and "near-tie" in view.flow.notes()[4]
    run.clear()
    assert view.flow.notes() == {}


def test_the_speculation_tab_is_usable_at_1280x800(qtbot):
    """The Speech tab at 1280x800 after a speculative run: the round table shows every
    column without scrolling, the plots keep room, the stream shows the legend line."""
    t, audio, _calls = _speculative_tab(qtbot)
    t.resize(1280, 800)
    t.show()
    with qtbot.waitSignal(t.decodeFinished, timeout=5000):
        t.set_audio(audio, "tone")
    qtbot.waitUntil(lambda: not t.is_busy(), timeout=5000)
    t.select_step(5)
    t.inspector_tabs.setCurrentWidget(t.speculation_view)
    qtbot.wait(50)
    view = t.speculation_view
    table = view.table
    assert table.isVisible() and table.rowCount() == 4
    assert table.horizontalScrollBar().maximum() == 0  # no column cut off
    assert view.position_plot.width() >= 100 and view.position_plot.height() >= 80
    assert view.gamma_plot.width() >= 100 and view.gamma_plot.height() >= 80
    assert t.stream.spec_legend.isVisible() and t.stream.scroll.height() >= t.stream.flow.rows_height(2)
    assert t.width() <= 1280
    t.shutdown()


def test_an_opened_speculative_exploration_offers_the_speculation_tab(qtbot):
    from gui import exploration
    from gui.tabs.speech import SpeechTab

    from .fakes_speculation import finished

    events = speculative_events()
    run = RunState()
    _feed(run, events)
    run.finish(finished(events))
    data = exploration.to_json(run, task="speech", model="fake", input_description="tone", input_hash="0" * 64)
    tab = SpeechTab()
    qtbot.addWidget(tab)
    tabs = tab.inspector_tabs
    assert not tabs.isTabVisible(tabs.indexOf(tab.speculation_view))
    tab.run.restore(exploration.branches_from_json(data))
    assert tabs.isTabVisible(tabs.indexOf(tab.speculation_view))
    assert [s for s, _t in tab.stream.flow.ghosts()] == [5, 6]
    tab.shutdown()


def test_a_speculative_lane_beside_greedy_gives_its_speedup(qtbot):
    """Lanes: greedy | speculative (same other options): the speculative lane's time cell
    gives its speed-up per token over the greedy lane, measured in the same run."""
    from core.events import Finished, RunStats
    from core.options import DecodingOptions
    from gui.lanes_state import Lane, LanesState
    from gui.widgets.lanes import LanesView

    from .fakes_speculation import finished

    events = speculative_events()
    steps = [e for e in events if isinstance(e, StepEvent)]
    plain = [dataclasses.replace(e, speculation="", spec_round=-1) for e in steps]
    state = LanesState("wer")
    state.start(["greedy", "speculative:draft=ngram"],
                [DecodingOptions(), DecodingOptions(strategy="speculative", draft="ngram")])
    g, s = state.lanes
    g.steps, g.finished = plain, Finished("x", [], RunStats(decode_s=0.44, n_tokens=11))
    s.steps, s.finished = steps, finished(events)  # 0.2 s for 11 tokens
    assert state.speedup(1) == (pytest.approx(2.2), 0) and state.speedup(0) is None
    view = LanesView(state)
    qtbot.addWidget(view)
    view.refresh()
    rows = view.summary()
    assert rows[1][2] == "0.20 s · 2.20×" and rows[0][2] == "0.44 s"
    assert "lane 1" in view.table.item(1, 2).toolTip() and "α 0.64" in view.table.item(1, 2).toolTip()
    assert isinstance(Lane("greedy", DecodingOptions()).time_s, type(None))


def test_a_forks_run_figures_are_its_own_rounds_as_its_summary_counts_them(qtbot):
    """After a fork, the tab's run figures (α, drafted rounds, the charts) came from the
    branch's whole path (the parent's rounds before the fork step too) while the calls came
    from the fork's own summary: "4 calls, 6 with a draft" (found by trying the window). They
    are the fork run's own rounds now, as its summary counts them."""
    from .fakes_speculation import finished

    events = speculative_events()
    run, view = _view_with_run(qtbot, events)
    run.finish(finished(events))
    run.fork(0, 5, [123], " cat")
    b = run.growing_branch()
    run.set_current(b)
    fork_rounds = ((3, 3, "bonus"), (2, 1, "resampled"))
    forked = speculative_events(WORDS[:6], fork_rounds, step_offset=5)
    _feed(run, forked)
    run.flush()
    run.finish(finished(forked, fork_rounds))
    run.select(6)
    view.refresh()
    f = view.figures()
    assert (f["rounds"], f["drafted"], f["accepted"]) == (2, 5, 4)  # the fork's own, not 4 / 11 / 8
    text = view.run_label.text()
    assert "2 calls, 2 with a draft" in text and "(4/5)" in text
    assert "in all" in text  # the draft and target times are sums, and say so
