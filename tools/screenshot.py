"""Screenshots of the app as a person sees it, for the README and for review.

Opens the main window offscreen (QT_QPA_PLATFORM=offscreen, or a real X display
such as Xvfb), loads a bundled model in each tab, decodes the bundled sample,
selects a token, and saves one PNG per tab:

    .venv/bin/python tools/screenshot.py [--out assets] [--speech-model base]

Writes ``screenshot.png`` (speech tab), ``screenshot_ocr.png``,
``screenshot_translation.png``, ``screenshot_chain.png`` (the speech tab sampling
through a sampler chain, the chain-stage view of one step) and ``screenshot_beam.png``
(the translation tab's beam tree after a beam search on the sample, one node clicked; the
window at 1280 x 800) and ``screenshot_fork.png`` (the speech tab after two forks of the
greedy run, the fork diff; 1280 x 800) and ``screenshot_lens.png`` (the speech tab's logit
lens, layers x steps, after a greedy run with the lens captured; 1280 x 800) and
``screenshot_whatif.png`` / ``screenshot_noinput.png`` (the speech tab's What if view after
silencing ``--whatif-span`` of the greedy run, then after No input; 1280 x 800) and
``screenshot_lanes.png`` (the speech tab's Lanes view: greedy | beam 5 | sample T=0.8 | min-p
0.1 on one encoder output, scored against the sample's transcript; 1280 x 800) and
``screenshot_words.png`` (the speech tab with word timing on: word bands on the waveform, the
DTW path over the heatmap; 1280 x 800) and ``screenshot_longform.png`` (the speech tab after a
long-form run of tiny.en on the sample followed by espeak-ng sentences (over 30 s), with fallback forced by
``--longform-logprob``: the windows that fell back tinted on the waveform, the Attempts view with
a failed attempt opened beside the one that replaced it; 1280 x 800) (``--tabs`` picks a subset,
e.g. ``--tabs ocr,chain``).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop, QSettings, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from gui.main_window import MainWindow  # noqa: E402
from gui.worker import wait_all  # noqa: E402


def _wait(signal, action=None, timeout_ms=600_000):
    loop = QEventLoop()
    result = {}

    def done(*args):
        result["args"] = args
        loop.quit()

    signal.connect(done)
    QTimer.singleShot(timeout_ms, loop.quit)
    if action is not None:
        action()
    if "args" not in result:
        loop.exec()
    signal.disconnect(done)
    return result.get("args")


def _settle(ms=300):
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def _save(win, path: pathlib.Path) -> None:
    if not win.grab().save(str(path)):
        raise SystemExit(f"could not write {path}")
    print("saved", path)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "assets"))
    p.add_argument("--speech-model", default="base")
    p.add_argument("--step", type=int, default=6, help="token to select in the speech tab")
    p.add_argument("--ocr-model", default="bundled")
    p.add_argument("--ocr-step", type=int, default=36, help="token to select in the OCR tab")
    p.add_argument("--chain-step", type=int, default=3, help="token to select in the chain shot")
    p.add_argument("--beams", type=int, default=4, help="beam width of the beam-tree shot")
    p.add_argument("--lens-step", type=int, default=8, help="token to select in the lens shot")
    p.add_argument("--whatif-span", default="0.50,0.84", help="seconds T0,T1 the what-if shot silences "
                   "(the word 'door' in the bundled sample)")
    p.add_argument("--lanes", default="greedy,beam:5,sample:T=0.8,min-p:0.1",
                   help="the lanes of the lanes shot (specs separated by commas; a spec's own commas: use ;)")
    p.add_argument("--words-step", type=int, default=8, help="token to select in the word-timing shot")
    p.add_argument("--longform-model", default="tiny.en", help="model of the long-form shot")
    p.add_argument("--longform-logprob", type=float, default=-0.25,
                   help="the long-form shot's log-prob threshold (high: windows fall back)")
    p.add_argument("--longform-temperatures", default="0, 0.4, 0.8", help="the long-form shot's temperature ladder")
    p.add_argument("--tabs", default="speech,ocr,translation,chain,beam,fork,lens,whatif,lanes,words,longform",
                   help="comma-separated shots to take")
    args = p.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    app = QApplication.instance() or QApplication(sys.argv)
    settings = QSettings(os.path.join(tempfile.mkdtemp(), "shot.ini"), QSettings.Format.IniFormat)
    win = MainWindow(settings=settings, autoload=False)
    win.resize(1400, 900)
    win.show()

    tabs = {t.strip() for t in args.tabs.split(",")}

    shots = {
        "speech": (win.speech_tab, args.speech_model, args.step, "screenshot.png"),
        "ocr": (win.ocr_tab, args.ocr_model, args.ocr_step, "screenshot_ocr.png"),
        "translation": (win.translation_tab, "en-pt", 3, "screenshot_translation.png"),
    }
    for name, (tab, model, step, filename) in shots.items():
        if name not in tabs:
            continue
        win.tabs.setCurrentWidget(tab)
        _wait(tab.modelReady, lambda: tab.load_model(model))
        fin = _wait(tab.decodeFinished, tab.load_sample)
        print(f"{name}:", fin[0].text if fin else "(no result)")
        tab.select_step(step)
        _settle()
        _save(win, out / filename)
    if "chain" in tabs:
        from core.options import DecodingOptions

        tab = win.speech_tab
        win.tabs.setCurrentWidget(tab)
        if tab.model is None:
            _wait(tab.modelReady, lambda: tab.load_model(args.speech_model))
        chain = DecodingOptions(strategy="sample", seed=1, repetition_penalty=1.2, temperature=1.3, top_k=20,
                                top_p=0.95, min_p=0.02)
        tab.options_panel.setOptions(chain)
        for section in tab.options_panel.sections.values():
            section.setExpanded(section.title in ("Strategy", "Filters"))
        fin = _wait(tab.decodeFinished, lambda: (tab.options_panel.setOptions(chain, emit=True), tab.load_sample()))
        print("chain:", fin[0].text if fin else "(no result)")
        tab.select_step(args.chain_step)
        tab.inspector.stages_button.click()
        _settle()
        _save(win, out / "screenshot_chain.png")
    if "beam" in tabs:
        from core.options import DecodingOptions

        tab = win.translation_tab
        win.resize(1280, 800)
        win.tabs.setCurrentWidget(tab)
        if tab.model is None:
            _wait(tab.modelReady, lambda: tab.load_model("en-pt"))
        beam = DecodingOptions(strategy="beam", num_beams=args.beams)
        tab.options_panel.setOptions(beam)
        fin = _wait(tab.decodeFinished, lambda: (tab.options_panel.setOptions(beam, emit=True), tab.load_sample()))
        print("beam:", fin[0].text if fin else "(no result)")
        tree = tab.beam_tree
        tree.show_segment(0)
        path = tree.highlighted_path(0)
        node = tree.model.nodes[(0, path[min(6, len(path) - 2)])]
        tab.select_step(node.step)  # a token of the output: the tree selects its node
        _settle()
        _save(win, out / "screenshot_beam.png")
    if "fork" in tabs:
        tab = win.speech_tab
        win.resize(1280, 800)
        win.tabs.setCurrentWidget(tab)
        if tab.model is None:
            _wait(tab.modelReady, lambda: tab.load_model(args.speech_model))
        from core.options import DecodingOptions

        greedy = DecodingOptions()
        fin = _wait(tab.decodeFinished, lambda: (tab.options_panel.setOptions(greedy, emit=True), tab.load_sample()))
        print("fork root:", fin[0].text if fin else "(no result)")

        def fork_at(word: str, branch: int) -> None:
            tab.show_branch(branch)
            step = next(e.step for e in tab.run.steps() if e.text.strip() == word)
            tab.select_step(step)
            alt = next(r for r in tab.topk.rows() if not r.chosen and r.token_id >= 0)
            tab.fork(step, [alt.token_id], alt.text)
            while tab.is_decoding():
                _settle(50)
            _settle()

        fork_at("door", 0)
        fork_at("test", 0)
        tab.show_branch(1)
        tab.fork_diff.set_branch(1)
        tab.select_step(tab.run.branch(1).fork_step + 2)
        tab.inspector_tabs.setCurrentWidget(tab.fork_diff)
        _settle(400)
        _save(win, out / "screenshot_fork.png")
    if "lens" in tabs:
        from core.options import DecodingOptions

        tab = win.speech_tab
        win.resize(1280, 800)
        win.tabs.setCurrentWidget(tab)
        if tab.model is None:
            _wait(tab.modelReady, lambda: tab.load_model(args.speech_model))
        greedy = DecodingOptions()
        tab.options_panel.setOptions(greedy)
        tab.inspector_tabs.setCurrentWidget(tab.lens_view)
        tab.lens_view.set_capture(True)
        fin = _wait(tab.decodeFinished, lambda: (tab.options_panel.setOptions(greedy, emit=True), tab.load_sample()))
        print("lens:", fin[0].text if fin else "(no result)")
        tab.select_step(args.lens_step)
        _settle(400)
        _save(win, out / "screenshot_lens.png")
    if "whatif" in tabs:
        _whatif_shots(win, args, out)
    if "lanes" in tabs:
        _lanes_shot(win, args, out)
    if "words" in tabs:
        _words_shot(win, args, out)
    if "longform" in tabs:
        _longform_shot(win, args, out)
    win.close()
    wait_all(30000)  # worker threads (e.g. the OCR tab's CTC readings) end before Qt goes
    return 0


def _whatif_shots(win, args, out: pathlib.Path) -> None:
    """The speech tab after a greedy run on the sample: the span ``--whatif-span`` silenced
    (What if?), then No input; the What if view, 1280 x 800."""
    import time

    from core.options import DecodingOptions

    tab = win.speech_tab
    win.resize(1280, 800)
    win.tabs.setCurrentWidget(tab)
    if tab.model is None:
        _wait(tab.modelReady, lambda: tab.load_model(args.speech_model))
    greedy = DecodingOptions()
    fin = _wait(tab.decodeFinished, lambda: (tab.options_panel.setOptions(greedy, emit=True), tab.load_sample()))
    print("what-if run:", fin[0].text if fin else "(no result)")

    def run(action) -> None:
        tab.whatif_result = None
        if not action():
            raise SystemExit("the what-if did not start: " + tab.whatif_view.mask_text())
        deadline = time.monotonic() + 600
        while (tab.whatif_result is None or tab.is_decoding()) and time.monotonic() < deadline:
            _settle(50)
        r = tab.whatif_result
        print(f"what-if ({r.kind}): {r.done.description}:",
              " ".join(f"{s.text.strip()}:{s.p_input:.2f}->{s.p_other:.2f}" for s in r.done.shifts))

    t0, t1 = (float(v) for v in args.whatif_span.split(","))
    tab.mask_button.setChecked(True)
    tab.mask_span_seconds(t0, t1)
    run(tab.run_what_if)
    depended = tab.whatif_result.done.depending()
    if depended:
        tab.select_step(depended[0].step)
    tab.inspector_tabs.setCurrentWidget(tab.whatif_view)
    _settle(400)
    _save(win, out / "screenshot_whatif.png")
    run(tab.run_no_input)
    _settle(400)
    _save(win, out / "screenshot_noinput.png")


#: the bundled speech sample's transcript (assets/samples/README.md), the lanes shot's reference
SPEECH_TRANSCRIPT = ("Open the door and turn on the lights. This is a test of the speech recognition system. "
                     "Thank you for listening.")


def _lanes_shot(win, args, out: pathlib.Path) -> None:
    """The speech tab after a greedy run on the sample, then the lanes ``--lanes`` on its
    encoder output, scored against the sample's transcript; the Lanes view, 1280 x 800."""
    from core.options import DecodingOptions

    tab = win.speech_tab
    win.resize(1280, 800)
    win.tabs.setCurrentWidget(tab)
    if tab.model is None:
        _wait(tab.modelReady, lambda: tab.load_model(args.speech_model))
    greedy = DecodingOptions()
    fin = _wait(tab.decodeFinished, lambda: (tab.options_panel.setOptions(greedy, emit=True), tab.load_sample()))
    print("lanes run:", fin[0].text if fin else "(no result)")
    while tab.is_busy():
        _settle(50)
    view, state = tab.lanes.view, tab.lanes.state
    view.set_specs([s.strip().replace(";", ",") for s in args.lanes.split(",")])
    view.set_reference(SPEECH_TRANSCRIPT)
    _wait(state.finished, view.request_run)
    while tab.is_busy():
        _settle(50)
    for k, lane in enumerate(state.lanes):
        score = lane.score.text() if lane.score is not None else "-"
        print(f"lane {k + 1} {lane.spec}: log p {lane.logprob:.2f}, {lane.time_s:.2f} s, {len(lane.steps)} tokens, "
              f"{score}: {lane.text}")
    print(f"agreement {state.mean_agreement():.2f}")
    tab.inspector_tabs.setCurrentWidget(view)
    _settle(400)
    _save(win, out / "screenshot_lanes.png")


def _words_shot(win, args, out: pathlib.Path) -> None:
    """The speech tab with word timing on after a greedy run on the sample: the word bands
    on the waveform (with the end-of-text row), the DTW path over the heatmap, token
    ``--words-step`` selected; 1280 x 800."""
    from core.options import DecodingOptions

    tab = win.speech_tab
    win.resize(1280, 800)
    win.tabs.setCurrentWidget(tab)
    if tab.model is None:
        _wait(tab.modelReady, lambda: tab.load_model(args.speech_model))
    tab.word_timing_check.setChecked(True)
    fin = _wait(tab.decodeFinished, lambda: (tab.options_panel.setOptions(DecodingOptions(), emit=True),
                                             tab.load_sample()))
    print("words run:", fin[0].text if fin else "(no result)")
    while tab.is_busy() or tab.word_timing.busy() or not tab.word_timing.final:
        _settle(50)
    for w in tab.word_timing.bands.words():
        print(f"{w.start:6.2f} {w.end:6.2f} {w.word}")
    tab.inspector_tabs.setCurrentWidget(tab.heatmap)
    tab.select_step(args.words_step)
    _settle(400)
    _save(win, out / "screenshot_words.png")


#: spoken by espeak-ng after the sample in the long-form shot (distinct sentences: joining the
#: sample to itself would be a true repetition, which the compression-ratio check flags)
LONGFORM_SENTENCES = (
    "The weather station on the hill records wind speed every ten minutes.",
    "Last winter the river froze twice, and the ferry stopped running for a week.",
    "Our library opens at nine on weekdays and closes early on Sunday afternoons.",
    "Please bring a pencil, a calculator and your student card to the exam.",
    "The orchestra will rehearse the second movement again before the concert.",
)


def _longform_shot(win, args, out: pathlib.Path) -> None:
    """The speech tab after a long-form run (``--longform-model`` on the sample followed by
    espeak-ng sentences, over 30 s; greedy, seed 0, log-prob threshold ``--longform-logprob`` so windows fall back, the
    no-speech check off): the
    fell-back windows tinted on the waveform, the Attempts view with the first failed attempt
    opened beside its replacement; 1280 x 800."""
    import numpy as np

    from core.inputs.audio import open_audio
    from core.options import DecodingOptions

    tab = win.speech_tab
    win.resize(1280, 800)
    win.tabs.setCurrentWidget(tab)
    _wait(tab.modelReady, lambda: tab.load_model(args.longform_model))
    while tab.is_busy():
        _settle(50)
    from tests.helpers.speech import synth_speech  # espeak-ng (Debian package)

    audio = open_audio(tab.sample_path()).audio
    clip = np.concatenate([audio] + [synth_speech(t) for t in LONGFORM_SENTENCES])
    panel = tab.longform_panel
    panel.mode_combo.blockSignals(True)
    panel.mode_combo.setCurrentIndex(1)  # long-form
    panel.mode_combo.blockSignals(False)
    panel.temperatures_edit.setText(args.longform_temperatures)
    panel.threshold_spins["logprob_threshold"].setValue(args.longform_logprob)
    panel.threshold_checks["no_speech_threshold"].setChecked(False)  # so the raised log-prob bar skips no speech
    fin = _wait(tab.decodeFinished, lambda: (tab.options_panel.setOptions(DecodingOptions(seed=0), emit=False),
                                             tab.set_audio(clip, f"{tab.sample_path().name} + espeak")))
    print("long-form run:", fin[0].text if fin else "(no result)")
    while tab.is_busy():
        _settle(50)
    view = tab.attempts_view
    for a in view.attempts():
        print(f"window {a.segment} {a.start:.2f}-{a.end:.2f} s try {a.attempt} T={a.temperature:g} "
              f"cr {a.compression_ratio:.2f} logp {a.avg_logprob:.2f} -> {a.verdict} {a.reasons}")
    tab.show_attempts()
    failed = next((r for r in range(len(view.attempts())) if view.row_kind(r) != "accepted"), 0)
    view.open_row(failed)
    _settle(400)
    _save(win, out / "screenshot_longform.png")


if __name__ == "__main__":
    sys.exit(main())
