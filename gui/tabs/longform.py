"""Long-form transcription in the Speech tab (issue 14 §3): the windows choice, the run,
the attempts, taking failed attempts back, File → Export.

An object of :class:`gui.tabs.speech.SpeechTab` (``tab.long_form``, :class:`LongForm`), which
talks to the tab through its public methods (``audio``, ``model``, ``language()``, ``run``,
``inspector_tabs``, ...); the tab hands it each decode event first (:meth:`LongForm.on_event`):

- the "windows" box and the "long-form ▾" settings (``gui.widgets.longform_panel``) sit in
  the files row; a long-form run calls ``SpeechModel.transcribe`` (openai/whisper
  ``transcribe()``: seek, previous-text conditioning, temperature fallback) in the worker;
- each ``core.events.AttemptEvent`` goes to the Attempts view (``gui.widgets.attempts_view``)
  and the waveform's window marks (``gui.widgets.window_marks``); an attempt that was not
  kept is taken back from the run (``RunState.retract``), and the run tab redraws the token
  stream, step strip, heatmap and lens from the run's steps (``RunState.stepsRetracted``);
- File → Export… (:meth:`LongForm.export_transcript`) writes txt/srt/vtt/tsv/json with
  ``core.tasks.writers.render``: a long-form run's ``core.tasks.longform.result_dict``, or
  the timestamp segments of a run decoded with timestamps (``SpeechModel.segments``), or
  else one segment per 30 s window, timed by the window or by its word timing;
- forks, input what-ifs and lanes re-decode fixed 30 s windows (``SpeechModel.fork`` /
  ``what_if`` / ``decode_lanes``), so they are refused on a long-form run, with the reason in
  the status bar, until the core takes ``longform=`` there (then set
  :data:`LONGFORM_EXPLORING` and route them in :meth:`LongForm.refusal`,
  which the run tab asks through ``exploring_refusal``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLabel, QWidget

from core.catalog import FRAME_S, SAMPLE_RATE
from core.events import AttemptEvent, Finished, SegmentEvent
from core.options import DecodingOptions

from ..widgets.attempts_view import AttemptsView, attempt_kind
from ..widgets.longform_panel import LongFormPanel
from ..widgets.window_marks import WindowMarks

#: forks, what-ifs and lanes follow a long-form run's windows (False until the core's fork
#: and what_if take ``longform=``)
LONGFORM_EXPLORING = True
EXPORT_FILTERS = "SubRip subtitles (*.srt);;WebVTT subtitles (*.vtt);;Text (*.txt);;Tab-separated (*.tsv);;JSON (*.json)"


def ask_export_path(parent: QWidget | None, suggested: str) -> str:
    """Ask where to export the transcript (``QFileDialog``); "" when the user cancels. The
    suffix picks the format (tests replace this function)."""
    path, chosen = QFileDialog.getSaveFileName(parent, "Export transcript", suggested, EXPORT_FILTERS)
    if path and not Path(path).suffix and chosen:
        path += chosen[chosen.rfind("*.") + 1: -1]
    return path


class LongForm:
    """Long-form runs, attempts and export for the Speech tab (see the module docstring).
    The tab calls :meth:`add_controls` while building its files row and :meth:`attach` at
    the end of its ``__init__``.

    Attributes:
        is_run: the current run is long-form (``SpeechModel.transcribe``).
        attempts: the current long-form run's attempts (``AttemptEvent``), in order.
        finished: its ``Finished`` event, None while it runs.
        language: the language it was decoded in (detected, or the one chosen).
    """

    def __init__(self, tab: Any) -> None:
        self.tab = tab
        self.is_run = False
        self.attempts: list[AttemptEvent] = []
        self.finished: Finished | None = None
        self.language: str | None = None

    # ------------------------------------------------------------ building
    def add_controls(self, row: QHBoxLayout) -> None:
        """Put the windows box and the "long-form ▾" button into ``row``."""
        self.panel = LongFormPanel(self.tab)
        row.addWidget(QLabel("windows"))
        row.addWidget(self.panel.mode_combo)
        row.addWidget(self.panel.button)

    def attach(self) -> None:
        """The Attempts tab, the window marks and the run-state hooks (after the layout exists)."""
        tab = self.tab
        self.attempts_view = AttemptsView()
        tab.add_inspector_view(self.attempts_view, "Attempts")
        tab.inspector_tabs.setTabVisible(tab.inspector_tabs.indexOf(self.attempts_view), False)
        self.window_marks = WindowMarks(tab.axis)  # on the waveforms of the input's axis
        self.panel.changed.connect(tab.request_decode)
        tab.run.cleared.connect(self._cleared)

    # ------------------------------------------------------------ the run
    def active(self) -> bool:
        """The next run is long-form: the windows box says so (auto: audio over 30 s)."""
        audio = self.tab.audio
        return audio is not None and self.panel.uses_longform(len(audio) / SAMPLE_RATE)

    def decode_fn(self, options: DecodingOptions) -> Callable[[Callable[[], bool]], Iterator[Any]]:
        """The worker's generator of a long-form run (``SpeechModel.transcribe``).

        Raises:
            ValueError: bad long-form settings (shown in the banner).
        """
        lf = self.panel.options()
        tab = self.tab
        model, audio, language, task = tab.model, tab.audio, tab.language(), tab.task()
        self.is_run, self.language = True, language
        self.attempts_view.set_rule(lf)
        self._set_attempts_tab(True)

        def gen(cancel):
            return model.transcribe(audio, options, longform=lf, language=language, task=task, cancel=cancel)

        return gen

    def on_event(self, ev: Any) -> bool:
        """One event of the tab's decode, before the run tab takes it: False when it was
        an attempt (taken here, not a step of the run), True when the tab takes it on."""
        tab = self.tab
        if isinstance(ev, AttemptEvent):
            self._take_attempt(ev)
            return False
        if isinstance(ev, SegmentEvent) and self.is_run and tab.audio is not None:
            # long-form windows move with seek, so their number is not known ahead: progress in seconds
            start, total = ev.source_offset * FRAME_S, len(tab.audio) / SAMPLE_RATE
            tab.busyChanged.emit(True, f"Decoding window {ev.segment + 1} ({start:.0f} of {total:.0f} s)…")
            tab.progressChanged.emit(int(start), max(1, int(total)))
        if isinstance(ev, Finished) and self.is_run:
            self.finished = ev
            self.language = getattr(tab.model, "last_language", None) or self.language
        return True

    def _take_attempt(self, ev: AttemptEvent) -> None:
        """One attempt ended: list it, mark its window, and take its steps back when it was
        not kept (the next attempt is numbered from the same step)."""
        self.attempts.append(ev)
        self.tab.run.keep_attention(ev)  # its end-of-text row goes to disk with its window's steps
        self.attempts_view.add(ev)
        self.window_marks.add(ev)
        if not ev.kept_in_transcript:
            self.tab.run.retract(ev.segment, ev.step_offset)
        failed = sum(attempt_kind(a) != "accepted" for a in self.attempts)
        tabs = self.tab.inspector_tabs
        tabs.setTabText(tabs.indexOf(self.attempts_view), f"Attempts ⚠{failed}" if failed else "Attempts")

    def _cleared(self) -> None:
        """A new run (or no input): forget the attempts and marks."""
        self.is_run, self.attempts, self.finished = False, [], None
        self.attempts_view.clear()
        self.window_marks.clear()
        self._set_attempts_tab(False)

    def _set_attempts_tab(self, on: bool) -> None:
        tabs = self.tab.inspector_tabs
        i = tabs.indexOf(self.attempts_view)
        tabs.setTabText(i, "Attempts")
        if not on and tabs.currentIndex() == i:
            tabs.setCurrentWidget(self.tab.heatmap)
        tabs.setTabVisible(i, on)

    def show_attempts(self) -> None:
        """Bring the Attempts tab to the front."""
        self.tab.inspector_tabs.setCurrentWidget(self.attempts_view)

    def alignment_input(self, steps: list) -> tuple[list, dict | None]:
        """(steps, end rows or None) for word timing (``gui.tabs.word_timing``): on a long-form
        run's main branch, each finished window's transcript steps (the tail after its last
        timestamp pair, decoded again in the next window, left out) and its end row from the
        AttemptEvent (end-of-text attention, or the first dropped token's when a tail was
        dropped; as ``core.cli.longform.longform_words``); otherwise ``steps`` unchanged."""
        if not self.is_run or self.tab.run.current_branch() != 0:
            return steps, None
        kept = {a.segment: a for a in self.attempts if a.kept_in_transcript}
        out = [ev for ev in steps if ev.segment not in kept
               or ev.step < kept[ev.segment].step_offset + kept[ev.segment].kept_tokens]
        rows = {seg: a.end_attention if a.kept_tokens == len(a.steps) else a.steps[a.kept_tokens].cross_attention
                for seg, a in kept.items() if a.kept_tokens}
        return out, rows

    # ------------------------------------------------------------ exploring a long-form run
    def refusal(self, what: str) -> str:
        """Why ``what`` ("Forks", "What-ifs", "Lanes") cannot run on the current run ("" if it can):
        forks and what-ifs go back to the run's own windows (``longform=True``); lanes do not."""
        if (LONGFORM_EXPLORING and what != "Lanes") or not (self.is_run or self.active()):
            return ""
        return (f"{what} decode fixed 30 s windows and cannot follow a long-form run's seek and fallback yet: "
                "set windows to 'fixed 30 s' to use them.")

    # ------------------------------------------------------------ export
    def export_result(self) -> dict:
        """The last run as openai/whisper ``transcribe()``'s result dict.

        Raises:
            ValueError: no run, or a long-form run still going (one line: what to do).
        """
        tab, run = self.tab, self.tab.run
        if not tab.has_input() or tab.model is None or (not len(run) and self.finished is None):
            raise ValueError("Nothing to export yet: open or record audio, load a model and decode it first.")
        if self.is_run:
            if self.finished is None:
                raise ValueError("The long-form run is still decoding: wait for it to end, then export.")
            from core.tasks.longform import result_dict

            return result_dict(self.attempts + [self.finished], self.language)
        segments = tab.model.segments(run.steps())
        if not segments:
            return self._window_result()
        return {"text": run.text(run.current_branch()), "language": tab.language(),
                "segments": [{"id": i, "seek": 0, "start": s["start"], "end": s["end"],
                              "text": " " + s["text"].strip(), "tokens": []} for i, s in enumerate(segments)]}

    def _window_result(self) -> dict:
        """A run without timestamp tokens as a result: one segment per 30 s window, timed by
        the window's bounds (cut at the audio's end), or by its words when word timing is on
        and has aligned them (``core.tasks.writers.window_result``)."""
        from core.catalog import WINDOW_S
        from core.tasks.writers import window_result
        from gui.run_state import plain_text

        tab = self.tab
        duration = len(tab.audio) / SAMPLE_RATE
        per_window: dict[int, list] = {}
        for ev in tab.run.steps():
            per_window.setdefault(ev.segment, []).append(ev)
        order = sorted(per_window)
        windows = [(i * WINDOW_S, min((i + 1) * WINDOW_S, duration), " " + plain_text(e.text for e in per_window[i]))
                   for i in order]
        timing = getattr(tab, "word_timing", None)
        alignment = timing.alignment if timing is not None and timing.enabled() else None
        words = None
        if alignment is not None and alignment.words:
            window_of = {ev.step: ev.segment for evs in per_window.values() for ev in evs}
            words = [[] for _ in order]
            slot = {w: k for k, w in enumerate(order)}
            for w in alignment.words:
                seg = next((window_of[s] for s in w.steps if s in window_of), None)
                if seg is not None:
                    words[slot[seg]].append({"word": w.word, "start": round(w.start, 3), "end": round(w.end, 3),
                                             "probability": round(w.prob, 6)})
        language = tab.language()
        if language == "auto":
            language = getattr(tab.model, "last_language", None) or language
        return window_result(windows, language, words=words)

    def export_transcript(self, path: str | None = None) -> bool:
        """File → Export…: write the last run as txt/srt/vtt/tsv/json (the file's suffix picks
        it; ``core.tasks.writers.render``). Asks where when ``path`` is None. Errors go to
        the banner as one line. True when written."""
        from core.tasks.writers import FORMATS, render

        try:
            result = self.export_result()
        except ValueError as exc:
            self.tab.show_error(str(exc))
            return False
        if path is None:
            from PySide6.QtCore import QSettings

            folder = Path(str(QSettings().value("speech/export_dir", str(Path.home()))))
            path = ask_export_path(self.tab, str(folder / f"{Path(self.tab.source_name).stem or 'transcript'}.srt"))
            if not path:
                return False
        path = Path(path)
        fmt = path.suffix.lstrip(".").lower()
        if fmt not in FORMATS:
            self.tab.show_error(f"Cannot export {path.name}: name the file .{', .'.join(FORMATS)}")
            return False
        try:
            text = render(result, fmt)
            path.write_text(text, encoding="utf-8", newline="\n")
        except (OSError, ValueError) as exc:
            self.tab.show_error(f"Could not export {path.name}: {exc}")
            return False
        from PySide6.QtCore import QSettings

        QSettings().setValue("speech/export_dir", str(path.parent))
        self.tab.clear_error()
        n = len(result["segments"])
        self.tab.statusMessage.emit(f"Exported {n} segment{'s' if n != 1 else ''} to {path.name}")
        return True

    # ------------------------------------------------------------ settings
    def save_settings(self, s) -> None:
        """Keep the long-form settings in ``s`` (QSettings, ``speech/longform/...``)."""
        for key, value in self.panel.settings().items():
            s.setValue(f"speech/longform/{key}", value)

    def restore_settings(self, s) -> None:
        """Apply the long-form settings kept in ``s``."""
        keys = self.panel.settings().keys()
        self.panel.apply_settings({k: s.value(f"speech/longform/{k}") for k in keys})
