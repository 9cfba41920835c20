"""Long-form transcription in the Speech tab (issue 14 §3): the windows choice, the run,
the attempts, taking failed attempts back, File → Export.

A mixin of :class:`gui.tabs.speech.SpeechTab` (the speech tab keeps only small hooks):

- the "windows" box and the "long-form ▾" settings (``gui.widgets.longform_panel``) sit in
  the files row; a long-form run calls ``SpeechModel.transcribe`` (openai/whisper
  ``transcribe()``: seek, previous-text conditioning, temperature fallback) in the worker;
- each ``core.events.AttemptEvent`` goes to the Attempts view (``gui.widgets.attempts_view``)
  and the waveform's window marks (``gui.widgets.window_marks``); an attempt that was not
  kept is taken back from the run (``RunState.retract``), and the run tab redraws the token
  stream, step strip, heatmap and lens from the run's steps (``RunState.stepsRetracted``);
- File → Export… (:meth:`LongFormMixin.export_transcript`) writes txt/srt/vtt/tsv/json with
  ``core.tasks.writers.render``: a long-form run's ``core.tasks.longform.result_dict``, or
  the timestamp segments of a run decoded with timestamps (``SpeechModel.segments``), or
  else one segment per 30 s window, timed by the window or by its word timing;
- forks, input what-ifs and lanes re-decode fixed 30 s windows (``SpeechModel.fork`` /
  ``what_if`` / ``decode_lanes``), so they are refused on a long-form run, with the reason in
  the status bar, until the core takes ``longform=`` there (then set
  :data:`LONGFORM_EXPLORING` and route them in :meth:`LongFormMixin.longform_refusal`,
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


class LongFormMixin:
    """Long-form runs, attempts and export for the Speech tab (see the module docstring).
    The tab calls :meth:`add_longform_controls` while building its files row and
    :meth:`init_longform` at the end of its ``__init__``."""

    # ------------------------------------------------------------ building
    def add_longform_controls(self, row: QHBoxLayout) -> None:
        """Put the windows box and the "long-form ▾" button into ``row``."""
        self.longform_panel = LongFormPanel(self)
        row.addWidget(QLabel("windows"))
        row.addWidget(self.longform_panel.mode_combo)
        row.addWidget(self.longform_panel.button)

    def init_longform(self) -> None:
        """The Attempts tab, the window marks and the run-state hooks (after the layout exists)."""
        self._lf_run = False  # the current run is long-form
        self._lf_attempts: list[AttemptEvent] = []
        self._lf_finished: Finished | None = None
        self._lf_language: str | None = None
        self.attempts_view = AttemptsView()
        self.add_inspector_view(self.attempts_view, "Attempts")
        self.inspector_tabs.setTabVisible(self.inspector_tabs.indexOf(self.attempts_view), False)
        self.window_marks = WindowMarks(self.axis)  # on the waveforms of the input's axis
        self.longform_panel.changed.connect(self.request_decode)
        self.run.cleared.connect(self._longform_cleared)

    # ------------------------------------------------------------ the run
    def longform_active(self) -> bool:
        """The next run is long-form: the windows box says so (auto: audio over 30 s)."""
        audio = getattr(self, "audio", None)
        return audio is not None and self.longform_panel.uses_longform(len(audio) / SAMPLE_RATE)

    def longform_fn(self, options: DecodingOptions) -> Callable[[Callable[[], bool]], Iterator[Any]]:
        """The worker's generator of a long-form run (``SpeechModel.transcribe``).

        Raises:
            ValueError: bad long-form settings (shown in the banner).
        """
        lf = self.longform_panel.options()
        model, audio, language, task = self.model, self.audio, self.language(), self.task()
        self._lf_run, self._lf_language = True, language
        self._set_attempts_tab(True)

        def gen(cancel):
            return model.transcribe(audio, options, longform=lf, language=language, task=task, cancel=cancel)

        return gen

    def _on_event(self, ev: Any) -> None:
        if isinstance(ev, AttemptEvent):
            self._take_attempt(ev)
            return
        if isinstance(ev, SegmentEvent) and self._lf_run and self.audio is not None:
            # long-form windows move with seek, so their number is not known ahead: progress in seconds
            start, total = ev.source_offset * FRAME_S, len(self.audio) / SAMPLE_RATE
            self.busyChanged.emit(True, f"Decoding window {ev.segment + 1} ({start:.0f} of {total:.0f} s)…")
            self.progressChanged.emit(int(start), max(1, int(total)))
        if isinstance(ev, Finished) and self._lf_run:
            self._lf_finished = ev
            self._lf_language = getattr(self.model, "last_language", None) or self._lf_language
        super()._on_event(ev)

    def _take_attempt(self, ev: AttemptEvent) -> None:
        """One attempt ended: list it, mark its window, and take its steps back when it was
        not kept (the next attempt is numbered from the same step)."""
        self._lf_attempts.append(ev)
        self.run.keep_attention(ev)  # its end-of-text row goes to disk with its window's steps
        self.attempts_view.add(ev)
        self.window_marks.add(ev)
        if not ev.kept_in_transcript:
            self.run.retract(ev.segment, ev.step_offset)
        failed = sum(attempt_kind(a) != "accepted" for a in self._lf_attempts)
        i = self.inspector_tabs.indexOf(self.attempts_view)
        self.inspector_tabs.setTabText(i, f"Attempts ⚠{failed}" if failed else "Attempts")

    def _longform_cleared(self) -> None:
        """A new run (or no input): forget the attempts and marks."""
        self._lf_run, self._lf_attempts, self._lf_finished = False, [], None
        self.attempts_view.clear()
        self.window_marks.clear()
        self._set_attempts_tab(False)

    def _set_attempts_tab(self, on: bool) -> None:
        i = self.inspector_tabs.indexOf(self.attempts_view)
        self.inspector_tabs.setTabText(i, "Attempts")
        if not on and self.inspector_tabs.currentIndex() == i:
            self.inspector_tabs.setCurrentWidget(self.heatmap)
        self.inspector_tabs.setTabVisible(i, on)

    def show_attempts(self) -> None:
        """Bring the Attempts tab to the front."""
        self.inspector_tabs.setCurrentWidget(self.attempts_view)

    def alignment_input(self, steps: list) -> tuple[list, dict | None]:
        """(steps, end rows or None) for word timing (``gui.tabs.word_timing``): on a long-form
        run's main branch, each finished window's transcript steps (the tail after its last
        timestamp pair, decoded again in the next window, left out) and its end row from the
        AttemptEvent (end-of-text attention, or the first dropped token's when a tail was
        dropped; as ``core.cli.longform.longform_words``); otherwise ``steps`` unchanged."""
        if not self._lf_run or self.run.current_branch() != 0:
            return steps, None
        kept = {a.segment: a for a in self._lf_attempts if a.kept_in_transcript}
        out = [ev for ev in steps if ev.segment not in kept
               or ev.step < kept[ev.segment].step_offset + kept[ev.segment].kept_tokens]
        rows = {seg: a.end_attention if a.kept_tokens == len(a.steps) else a.steps[a.kept_tokens].cross_attention
                for seg, a in kept.items() if a.kept_tokens}
        return out, rows

    # ------------------------------------------------------------ exploring a long-form run
    def longform_refusal(self, what: str) -> str:
        """Why ``what`` ("Forks", "What-ifs", "Lanes") cannot run on the current run ("" if it can):
        forks and what-ifs go back to the run's own windows (``longform=True``); lanes do not."""
        if (LONGFORM_EXPLORING and what != "Lanes") or not (self._lf_run or self.longform_active()):
            return ""
        return (f"{what} decode fixed 30 s windows and cannot follow a long-form run's seek and fallback yet: "
                "set windows to 'fixed 30 s' to use them.")

    def exploring_refusal(self, what: str) -> str:
        """The run tab's question before a fork or a what-if (``RunTab.exploring_refusal``)."""
        return self.longform_refusal(what)

    @property
    def longform_run(self) -> bool:
        """The current run is long-form (``SpeechModel.transcribe``)."""
        return bool(getattr(self, "_lf_run", False))

    @property
    def longform_attempts(self) -> list[AttemptEvent]:
        """The attempts of the current long-form run, in order."""
        return list(getattr(self, "_lf_attempts", []))

    # ------------------------------------------------------------ export
    def export_result(self) -> dict:
        """The last run as openai/whisper ``transcribe()``'s result dict.

        Raises:
            ValueError: no run, or a long-form run still going (one line: what to do).
        """
        if not self.has_input() or self.model is None or (not len(self.run) and self._lf_finished is None):
            raise ValueError("Nothing to export yet: open or record audio, load a model and decode it first.")
        if self._lf_run:
            if self._lf_finished is None:
                raise ValueError("The long-form run is still decoding: wait for it to end, then export.")
            from core.tasks.longform import result_dict

            return result_dict(self._lf_attempts + [self._lf_finished], self._lf_language)
        segments = self.model.segments(self.run.steps())
        if not segments:
            return self._window_result()
        return {"text": self.run.text(self.run.current_branch()), "language": self.language(),
                "segments": [{"id": i, "seek": 0, "start": s["start"], "end": s["end"],
                              "text": " " + s["text"].strip(), "tokens": []} for i, s in enumerate(segments)]}

    def _window_result(self) -> dict:
        """A run without timestamp tokens as a result: one segment per 30 s window, timed by
        the window's bounds (cut at the audio's end), or by its words when word timing is on
        and has aligned them (``core.tasks.writers.window_result``)."""
        from core.catalog import WINDOW_S
        from core.tasks.writers import window_result
        from gui.run_state import plain_text

        duration = len(self.audio) / SAMPLE_RATE
        per_window: dict[int, list] = {}
        for ev in self.run.steps():
            per_window.setdefault(ev.segment, []).append(ev)
        order = sorted(per_window)
        windows = [(i * WINDOW_S, min((i + 1) * WINDOW_S, duration), " " + plain_text(e.text for e in per_window[i]))
                   for i in order]
        timing = getattr(self, "word_timing", None)
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
        language = self.language()
        if language == "auto":
            language = getattr(self.model, "last_language", None) or language
        return window_result(windows, language, words=words)

    def export_transcript(self, path: str | None = None) -> bool:
        """File → Export…: write the last run as txt/srt/vtt/tsv/json (the file's suffix picks
        it; ``core.tasks.writers.render``). Asks where when ``path`` is None. Errors go to
        the banner as one line. True when written."""
        from core.tasks.writers import FORMATS, render

        try:
            result = self.export_result()
        except ValueError as exc:
            self.show_error(str(exc))
            return False
        if path is None:
            from PySide6.QtCore import QSettings

            folder = Path(str(QSettings().value("speech/export_dir", str(Path.home()))))
            path = ask_export_path(self, str(folder / f"{Path(self.source_name).stem or 'transcript'}.srt"))
            if not path:
                return False
        path = Path(path)
        fmt = path.suffix.lstrip(".").lower()
        if fmt not in FORMATS:
            self.show_error(f"Cannot export {path.name}: name the file .{', .'.join(FORMATS)}")
            return False
        try:
            text = render(result, fmt)
            path.write_text(text, encoding="utf-8", newline="\n")
        except (OSError, ValueError) as exc:
            self.show_error(f"Could not export {path.name}: {exc}")
            return False
        from PySide6.QtCore import QSettings

        QSettings().setValue("speech/export_dir", str(path.parent))
        self.clear_error()
        n = len(result["segments"])
        self.statusMessage.emit(f"Exported {n} segment{'s' if n != 1 else ''} to {path.name}")
        return True

    # ------------------------------------------------------------ settings
    def save_longform_settings(self, s) -> None:
        for key, value in self.longform_panel.settings().items():
            s.setValue(f"speech/longform/{key}", value)

    def restore_longform_settings(self, s) -> None:
        keys = self.longform_panel.settings().keys()
        self.longform_panel.apply_settings({k: s.value(f"speech/longform/{k}") for k in keys})
