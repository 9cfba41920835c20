"""The main window: one tab per task, a status bar with run statistics and Cancel.

File: Open…, Export…, Save / Open exploration…, Quit. Edit: Previous exploration (Ctrl+Z) and
Next exploration (Ctrl+Shift+Z) bring back a branch tree a new run replaced
(``gui.exploration_history``). Closing asks Save / Discard / Cancel for unsaved recordings
and unsaved exploration work (the one dialog, ``gui.tabs.speech.ask_unsaved``).

Settings (``QSettings``, organisation "DecodingExplorer") keep the window geometry,
the splitter sizes, the decoding options and the model/language/task choices.
"""

from __future__ import annotations

from PySide6.QtCore import QSettings, QSize, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFileDialog, QLabel, QMainWindow, QProgressBar, QPushButton, QWidget

from core.processors.stages import run_reports

from .tabs import speech as speech_module
from .tabs.base import DecodeTab
from .tabs.ocr import OCRTab
from .tabs.speech import SpeechTab
from .tabs.translation import TranslationTab
from .widgets.quiet_tabs import QuietTabWidget

ORGANIZATION = "DecodingExplorer"
APPLICATION = "DecodingExplorer"


#: the window's first size when nothing is saved, pixels; shrunk to fit the screen
DEFAULT_SIZE = (1400, 900)


def first_size(available: QSize | None, default: tuple[int, int] = DEFAULT_SIZE) -> tuple[int, int]:
    """The window's first (width, height) in pixels: ``default``, shrunk to 95 % of the
    screen's available geometry (without panels/taskbars) so the status bar and Cancel are
    on screen at 1280x800; ``available`` None (no screen) keeps ``default``."""
    if available is None or available.width() <= 0 or available.height() <= 0:
        return default
    return min(default[0], int(available.width() * 0.95)), min(default[1], int(available.height() * 0.95))


def ask_exploration_path(parent: QWidget | None, save: bool, suggested: str) -> str:
    """Ask where to save / which exploration to open (``QFileDialog``); "" when cancelled.
    Tests replace this function to answer it."""
    flt = "Explorations (*.json);;All files (*)"
    if save:
        return QFileDialog.getSaveFileName(parent, "Save exploration", suggested, flt)[0]
    return QFileDialog.getOpenFileName(parent, "Open exploration", suggested, flt)[0]


#: the status bar's speculative figures, explained (its tooltip)
SPECULATION_TIP = (
    "Speculative decoding: α = drafted tokens the target accepted / drafted tokens; the speed-up is ms per "
    "token of plain greedy on the same input in the same run / this run's (predicted: Leviathan et al. 2023, "
    "Theorem 3.8, from the measured α and draft cost c). The Speculation tab has the rounds."
)


def speculation_status(spec: dict | None) -> str:
    """The status bar's speculative figures of a finished run (``SpeculationSummary.to_dict()``):
    " · α 0.72 · speed-up 1.31× (predicted 1.40×)"; α "–" when nothing was drafted; "" without them."""
    if not spec:
        return ""
    if spec.get("draft_tokens", 1) == 0:  # α = 0/0: undefined, not "every drafted token rejected"
        out = " · α – (nothing drafted)"
    else:
        out = f" · α {spec.get('acceptance_rate', 0.0):.2f}"
    measured, predicted = spec.get("speedup_measured"), spec.get("speedup_predicted")
    if measured is not None:
        out += f" · speed-up {measured:.2f}×"
        if predicted is not None:
            out += f" (predicted {predicted:.2f}×)"
    elif predicted is not None:
        out += f" · predicted speed-up {predicted:.2f}×"
    if spec.get("switched_off"):
        out += " · speculation switched off"
    return out


def _fmt(v: float | None, fmt: str, unit: str = "") -> str:
    return "–" if v is None else f"{v:{fmt}}{unit}"


class MainWindow(QMainWindow):
    """Tabs + status bar. ``autoload``: start loading each tab's model when shown."""

    def __init__(self, settings: QSettings | None = None, autoload: bool = True, parent: QWidget | None = None):
        super().__init__(parent)
        self.settings = settings if settings is not None else QSettings(ORGANIZATION, APPLICATION)
        self.setWindowTitle("Decoding Explorer")
        self.resize(*first_size(self.screen().availableGeometry().size() if self.screen() else None))

        self._run_notes: dict = {}  # tab -> the last run's stage notes (the watermark's z-score)
        self._busy_tabs: set = set()  # tabs that were busy at their last busyChanged
        self._message: tuple[str, float] = ("", 0.0)  # the status message shown: (full text, expiry, monotonic s)
        self.tabs = QuietTabWidget()  # a change inside a tab repaints the window only where it shows
        self.tabs.setDocumentMode(True)
        self.setCentralWidget(self.tabs)
        self.speech_tab = SpeechTab()
        self.add_tab(self.speech_tab)
        self.ocr_tab = OCRTab()
        self.add_tab(self.ocr_tab)
        self.translation_tab = TranslationTab()
        self.add_tab(self.translation_tab)

        sb = self.statusBar()
        self.stats_label = QLabel("encode – · – ms/token · – tokens/s · RTF –")
        self.stats_label.setToolTip(
            "encode: encoder time of the last run (0 when reused from the cache); ms/token and tokens/s: "
            "decoder speed; RTF: (encode + decode time) / audio duration"
        )
        self._stats_tip = self.stats_label.toolTip()
        self.model_label = QLabel("no model")
        self.device_label = QLabel("CPU")
        self.busy_bar = QProgressBar()
        self.busy_bar.setRange(0, 0)  # indeterminate
        self.busy_bar.setMaximumWidth(120)
        self.busy_bar.setMaximumHeight(14)
        self.busy_bar.hide()
        self.busy_label = QLabel("")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Cancel the running model load or decode (Esc)")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        sb.addPermanentWidget(self.busy_bar)
        sb.addPermanentWidget(self.busy_label)
        sb.addPermanentWidget(self.stats_label)
        sb.addPermanentWidget(self.model_label)
        sb.addPermanentWidget(self.device_label)
        sb.addPermanentWidget(self.cancel_button)

        self._add_actions()
        self.restore_settings()
        self.tabs.currentChanged.connect(lambda _i: self._show_tab_state(self.current_tab()))
        self._show_tab_state(self.current_tab())
        if autoload:
            QTimer.singleShot(0, self.autoload_models)

    # ----------------------------------------------------------------- tabs
    def add_tab(self, tab: DecodeTab) -> None:
        """Add a task tab and wire its signals to the status bar."""
        self.tabs.addTab(tab, tab.title)
        # a tab's messages show while it is the current tab (not over another tab's)
        tab.statusMessage.connect(lambda m, t=tab: self.show_message(m, 6000) if t is self.current_tab() else None)
        tab.errorOccurred.connect(lambda m: self.show_message("Error: " + m.splitlines()[0], 15000))
        tab.statsChanged.connect(lambda d, t=tab: self._on_stats(t, d))
        tab.decodeFinished.connect(lambda fin, t=tab: self._on_finished(t, fin))
        tab.busyChanged.connect(lambda b, m, t=tab: self._on_busy(t, b, m))
        tab.progressChanged.connect(lambda i, n, t=tab: self._on_busy(t, t.is_busy(), t.busy_message))

    def show_message(self, text: str, timeout_ms: int = 6000) -> None:
        """A transient status-bar message, cut with "…" to the room left of the busy bar and the
        statistics (cut again when they change while it shows: :meth:`_refit_message`); the
        full text is the tooltip. "" clears the message (a tab whose run was cleared with its
        input: the last run's "Decoded: …" goes)."""
        import time

        if not text:
            self._message = ("", 0.0)
            self.statusBar().clearMessage()
            self.statusBar().setToolTip("")
            return
        self._message = (text, time.monotonic() + timeout_ms / 1000)
        self.statusBar().showMessage(self._fitted(text), timeout_ms)
        self.statusBar().setToolTip(text)

    def _fitted(self, text: str) -> str:
        sb = self.statusBar()
        short = text if len(text) <= 90 else text[:89] + "…"
        if sb.isVisible():  # the permanent widgets as the bar will lay them out (a busy bar just shown too)
            widgets = [x for x in (self.busy_bar, self.busy_label, self.stats_label, self.model_label,
                                   self.device_label, self.cancel_button) if not x.isHidden()]
            taken = sum(min(x.sizeHint().width(), x.maximumWidth()) for x in widgets) + 8 * len(widgets) + 40
            short = sb.fontMetrics().elidedText(short, Qt.TextElideMode.ElideRight, max(40, sb.width() - taken))
        return short

    def _refit_message(self) -> None:
        """The statistics or the busy bar changed: the message showing is cut to the new room."""
        import time

        sb, (text, expires) = self.statusBar(), self._message
        left_ms = int(1000 * (expires - time.monotonic()))
        if text and sb.currentMessage() and left_ms > 0:
            fitted = self._fitted(text)
            if fitted != sb.currentMessage():
                sb.showMessage(fitted, left_ms)

    def current_tab(self) -> DecodeTab:
        """The visible tab."""
        return self.tabs.currentWidget()

    def autoload_models(self) -> None:
        """Start loading the visible tab's model now and each other tab's model when that
        tab is first shown (worker threads; the window stays responsive). Loading all three
        at start would cost seconds of CPU and a few GB for tabs the user may never open."""
        self._autoload_tab(self.current_tab())
        if not getattr(self, "_autoload_connected", False):
            self.tabs.currentChanged.connect(lambda i: self._autoload_tab(self.tabs.widget(i)))
            self._autoload_connected = True

    def _autoload_tab(self, tab: DecodeTab | None) -> None:
        initial = getattr(tab, "initial_model", None)
        if initial is not None and tab.model is None and not tab.is_loading():
            tab.load_model(initial())

    # ---------------------------------------------------------------- status
    def _on_finished(self, tab: DecodeTab, fin) -> None:
        """What the stages that shaped the run report about it (``run_reports``: the
        watermark's detector z-score), shown after the run's statistics."""
        options = tab.run.branch(0).options
        vocab = getattr(getattr(tab.model, "backend", None), "vocab_size", None)
        reports = run_reports(options, fin.token_ids, vocab) if options is not None and not fin.cancelled else {}
        self._run_notes[tab] = [note for _data, note in reports.values()]
        self._on_stats(tab, tab.last_stats)

    def _on_stats(self, tab: DecodeTab, d: dict) -> None:
        if d.get("live"):
            self._run_notes.pop(tab, None)  # a new run: the last one's notes go
        if tab is not self.current_tab():
            return
        enc = d.get("encode_ms")
        enc_s = "–" if enc is None else ("cached" if d.get("encoder_cached") else f"{enc:.0f} ms")
        live = " (live)" if d.get("live") and d.get("n_tokens") else ""
        self.stats_label.setText(
            f"encode {enc_s} · {_fmt(d.get('ms_per_token'), '.1f', ' ms/token')} · "
            f"{_fmt(d.get('tokens_per_s'), '.1f', ' tokens/s')}"
            + (f" · RTF {_fmt(d.get('rtf'), '.2f')}" if tab.rtf_applies() else "")  # speech only
            + live
            + speculation_status(d.get("speculative"))
            + "".join(f" · {note.split(' (')[0]}" for note in self._run_notes.get(tab, ()))
        )
        notes = list(self._run_notes.get(tab, ()))
        if d.get("speculative"):
            notes.append(SPECULATION_TIP)
        self.stats_label.setToolTip("\n".join([self._stats_tip, *notes]))
        dtype = d.get("dtype") if d.get("model") else None
        self.model_label.setText((d.get("model") or "no model") + (f" · {dtype}" if dtype else ""))
        self.model_label.setToolTip(f"The loaded model and its compute type ({dtype})" if dtype else "The loaded model")
        self.device_label.setText(d.get("device") or "CPU")
        self._refit_message()

    def _on_busy(self, tab: DecodeTab, busy: bool, message: str) -> None:
        busy = busy or tab.is_busy()
        started = busy and tab not in self._busy_tabs
        self._busy_tabs.discard(tab) if not busy else self._busy_tabs.add(tab)
        if tab is not self.current_tab():
            return  # shown when that tab becomes the current one (_show_tab_state)
        if started:  # a new run (decode, live session, lanes): the last run's "Decoded: …" goes
            self.statusBar().clearMessage()
            self.statusBar().setToolTip("")
        progress = tab.progress if busy else None
        if progress is None:
            self.busy_bar.setRange(0, 0)  # indeterminate
            self.busy_bar.setToolTip("")
        else:  # determinate: segments (sentences, 30 s windows) done of all
            self.busy_bar.setRange(0, progress[1])
            self.busy_bar.setValue(progress[0])
            self.busy_bar.setToolTip(f"{progress[0]} of {progress[1]} done")
        self.busy_bar.setVisible(busy)
        self.busy_label.setText(message if busy else "")
        self.cancel_button.setEnabled(busy)
        self._refit_message()

    def _show_tab_state(self, tab: DecodeTab | None) -> None:
        """Show ``tab``'s own model, statistics and busy state (the status bar follows the tab;
        the last tab's message goes)."""
        if tab is None:
            return
        self.statusBar().clearMessage()
        self.statusBar().setToolTip("")
        self._on_stats(tab, tab.last_stats)
        self._on_busy(tab, tab.is_busy(), tab.busy_message)

    def cancel(self) -> None:
        """Esc / Cancel: stop the current tab's model load and decode."""
        self.current_tab().cancel()

    # --------------------------------------------------------------- actions
    def _add_actions(self) -> None:
        def act(text, keys, slot):
            a = QAction(text, self)
            a.setShortcuts([QKeySequence(k) for k in keys])
            a.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            a.triggered.connect(slot)
            self.addAction(a)
            return a

        self.open_action = act("Open…", ["Ctrl+O"], lambda: self.current_tab().open_input())
        self.record_action = act("Record/Stop", ["Ctrl+R"], lambda: self.current_tab().toggle_record())
        self.decode_action = act("Decode", ["Ctrl+D", "F5"], lambda: self.current_tab().request_decode())
        self.cancel_action = act("Cancel", ["Esc"], self.cancel)
        self.quit_action = act("Quit", ["Ctrl+Q"], self.close)
        self.save_exploration_action = act("Save exploration…", ["Ctrl+Shift+S"], lambda: self.save_exploration())
        self.open_exploration_action = act("Open exploration…", ["Ctrl+Shift+O"], lambda: self.open_exploration())
        self.export_action = act("Export…", ["Ctrl+E"], lambda: self.export_transcript())
        self.play_live_action = act("Play file as live input…", [], lambda: self.play_file_as_live())
        self.open_sweep_action = act("Open sweep…", [], lambda: self.open_sweep())
        self.open_sweep_action.setToolTip("Open a 'decoding-explorer sweep' folder: its results table and plots; "
                                          "double-click a row to open that file in its tab with that strategy")
        for a, tip in ((self.export_action, "Export the Speech tab's last run as a transcript or subtitles: "
                        "txt, srt, vtt, tsv or json (as openai/whisper writes them)"),
                       (self.save_exploration_action, "Save the current tab's branches (forks), with the input's "
                        "hash, the model and the options, as a JSON file"),
                       (self.open_exploration_action, "Open a saved exploration on the same input and model"),
                       (self.play_live_action, "Play an audio file at real time as if it came from the microphone, "
                        "through the Speech tab's live mode (its streaming policy): watch the words become final")):
            a.setToolTip(tip)
            a.setStatusTip(tip)
        menu = self.menuBar().addMenu("&File")
        menu.addAction(self.open_action)
        menu.addAction(self.export_action)
        menu.addAction(self.play_live_action)
        menu.addAction(self.open_sweep_action)
        menu.addSeparator()
        menu.addAction(self.save_exploration_action)
        menu.addAction(self.open_exploration_action)
        menu.addSeparator()
        menu.addAction(self.quit_action)
        self.previous_exploration_action = act("Previous exploration", ["Ctrl+Z"],
                                               lambda: self.current_tab().previous_exploration())
        self.next_exploration_action = act("Next exploration", ["Ctrl+Shift+Z"],
                                           lambda: self.current_tab().next_exploration())
        for a, tip in ((self.previous_exploration_action, "Bring back the branch tree (forks, what-ifs) that a "
                        "run with other options, another input or an opened file replaced; shown, not decoded again"),
                       (self.next_exploration_action, "Go forward again to the tree that Previous exploration left")):
            a.setToolTip(tip)
            a.setStatusTip(tip)
        edit = self.menuBar().addMenu("&Edit")
        edit.addAction(self.previous_exploration_action)
        edit.addAction(self.next_exploration_action)

    def export_transcript(self, path: str | None = None) -> bool:
        """File → Export…: the current tab's last run as txt/srt/vtt/tsv/json (the Speech tab,
        ``gui.tabs.longform``); other tabs say where it works."""
        tab = self.current_tab()
        export = getattr(tab, "export_transcript", None)
        if export is None:
            self.show_message("Export writes transcripts and subtitles of speech: use it in the Speech tab.")
            return False
        return export(path)

    def play_file_as_live(self, path: str | None = None) -> bool:
        """File → Play file as live input: the Speech tab comes to the front and plays the file
        (None: asks for it) through its live mode (``gui.tabs.live``)."""
        self.tabs.setCurrentWidget(self.speech_tab)
        return self.speech_tab.play_file_as_live(path)

    def open_sweep(self, path: str | None = None):
        """File → Open sweep…: a ``decoding-explorer sweep`` folder's results and plots in a window of
        their own; a double-clicked row opens in its tab (``gui.sweep_view``). None when cancelled."""
        from .sweep_view import open_sweep

        return open_sweep(self, path)

    # ----------------------------------------------------------- explorations
    def _exploration_dir(self) -> str:
        from pathlib import Path

        return str(self.settings.value("exploration/dir", str(Path.home())))

    def save_exploration(self, path: str | None = None) -> bool:
        """File → Save exploration…: the current tab's branch tree as JSON (asks where)."""
        from pathlib import Path

        tab = self.current_tab()
        if not tab.has_input() or not len(tab.run):
            self.show_message("Nothing to save yet: decode an input first, then fork at a token.")
            return False
        if path is None:
            stem = Path(getattr(tab, "source_name", "") or tab.settings_key).stem or tab.settings_key
            path = ask_exploration_path(self, True, str(Path(self._exploration_dir()) / f"{stem}.exploration.json"))
            if not path:
                return False
        ok = tab.save_exploration(path)
        if ok:
            self.settings.setValue("exploration/dir", str(Path(path).parent))
        return ok

    def open_exploration(self, path: str | None = None) -> bool:
        """File → Open exploration…: read a saved tree into the tab it was made in (that tab
        comes to the front); refused, with what to do, if its input or model is not there."""
        from pathlib import Path

        from .exploration import ExplorationError, load

        if path is None:
            path = ask_exploration_path(self, False, self._exploration_dir())
            if not path:
                return False
        try:
            data = load(path)
        except ExplorationError as exc:
            self.current_tab().show_error(str(exc))
            return False
        tab = next((self.tabs.widget(i) for i in range(self.tabs.count())
                    if self.tabs.widget(i).settings_key == data.get("task")), self.current_tab())
        self.tabs.setCurrentWidget(tab)
        self.settings.setValue("exploration/dir", str(Path(path).parent))
        return tab.open_exploration(data, Path(path).name)

    # -------------------------------------------------------------- settings
    def restore_settings(self) -> None:
        """Geometry, then each tab's choices."""
        s = self.settings
        geo = s.value("window/geometry")
        if geo is not None:
            self.restoreGeometry(geo)
            screen = self.screen()
            if screen is not None:  # saved on a larger screen: fit this one
                w, h = first_size(screen.availableGeometry().size(), (self.width(), self.height()))
                if (w, h) != (self.width(), self.height()):
                    self.resize(w, h)
        for i in range(self.tabs.count()):
            self.tabs.widget(i).restore_settings(s)
        idx = s.value("window/tab")
        if idx is not None:
            try:
                self.tabs.setCurrentIndex(int(idx))
            except (TypeError, ValueError):
                pass

    def save_settings(self) -> None:
        """Store geometry and each tab's choices."""
        s = self.settings
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/tab", self.tabs.currentIndex())
        for i in range(self.tabs.count()):
            self.tabs.widget(i).save_settings(s)
        s.sync()

    def confirm_explorations(self, tab: DecodeTab) -> bool:
        """Before the window closes: with exploration work in ``tab`` not saved (forks,
        what-ifs, kept earlier trees, lanes: ``tab.exploration_work()``), ask Save / Discard /
        Cancel with the dialog the recordings use (``gui.tabs.speech.ask_unsaved``). Save asks
        where to write each unsaved tree (:func:`ask_exploration_path`). False keeps the window
        open (Cancel, or a save dialog cancelled or failed)."""
        from pathlib import Path

        work = tab.exploration_work() if hasattr(tab, "exploration_work") else []
        if not work:
            return True
        self.tabs.setCurrentWidget(tab)
        text = f"The {tab.title} tab has exploration work that is not saved: " + "; ".join(work) + "."
        answer = speech_module.ask_unsaved(
            self, text, "Save each exploration as a file (File → Open exploration… brings it back), discard it, "
                        "or cancel and keep the window open.", title="Unsaved exploration")
        if answer == "discard":
            return True
        if answer != "save":
            return False
        stem = Path(getattr(tab, "source_name", "") or tab.settings_key).stem or tab.settings_key
        for k, entry in enumerate(tab.unsaved_explorations()):
            name = f"{stem}.exploration.json" if k == 0 else f"{stem}.exploration-{k + 1}.json"
            path = ask_exploration_path(self, True, str(Path(self._exploration_dir()) / name))
            if not path or not tab.save_kept(entry, path):
                return False
            self.settings.setValue("exploration/dir", str(Path(path).parent))
        return True

    def closeEvent(self, event) -> None:  # noqa: N802
        """Ask each tab that has unsaved work (``confirm_close()``, e.g. the Speech tab's
        recordings, and :meth:`confirm_explorations`: Save / Discard / Cancel); a tab that
        says no keeps the window open."""
        for i in range(self.tabs.count()):
            tab = self.tabs.widget(i)
            confirm = getattr(tab, "confirm_close", None)
            if (confirm is not None and not confirm()) or not self.confirm_explorations(tab):
                event.ignore()
                return
        self.save_settings()
        for i in range(self.tabs.count()):
            self.tabs.widget(i).shutdown(wait_ms=2000)  # app.main waits for the rest (wait_all)
        super().closeEvent(event)
