"""The Speech tab's microphone and takes (gui/tabs/speech.py): the recording row
(:class:`~gui.tabs.recording.RecordingBar`), starting and stopping a recording, the takes
it leaves, choosing one as the input, and writing one to a wav file.

Nothing recorded is lost: each recording becomes a *take* ("take 1 (12.3 s)") in the takes
list and stays there until the user discards it, whatever is opened or recorded meanwhile.
:class:`SpeechTakes` is an object of the tab (``tab.mic``); the tab gives ``audio``,
``set_audio``, ``show_input``, ``input_area`` (``show_wave``, ``info_label``),
``update_buttons``, ``show_error`` / ``clear_error`` and ``statusMessage``; the dialogs that
ask about unsaved takes are the tab's (``gui.tabs.speech.ask_unsaved`` / ``ask_save_path``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QTabWidget, QWidget

from core.catalog import SAMPLE_RATE

from .recording import RecordingBar, RecordingError, Take


class SpeechTakes:
    """Recording and takes of the Speech tab (see module docstring)."""

    def __init__(self, tab: Any, dialogs: Any) -> None:
        """``dialogs``: the module whose ``ask_unsaved`` / ``ask_save_path`` ask the user
        (``gui.tabs.speech``; looked up at each question, so tests can replace them there)."""
        self.tab = tab
        self.dialogs = dialogs
        self.recording: RecordingBar | None = None
        #: (take, the tab's input when it was asked for): a finishing take to make the input
        #: when its worker ends, unless the input changed meanwhile
        self._wanted: tuple[Take, Any] | None = None

    def build_recording_bar(self) -> RecordingBar:
        """The microphone row (Record, device, level, takes, Save…, Discard) and its note."""
        bar = self.recording = RecordingBar()
        bar.record_button.clicked.connect(self.toggle_record)
        bar.save_button.clicked.connect(self.save_recording)
        bar.discard_button.clicked.connect(self.tab.discard_input)
        bar.takePicked.connect(self.select_take)
        bar.liveAudio.connect(self._show_live_audio)
        return bar

    # ---------------------------------------------------------- microphone
    @property
    def mic_ok(self) -> bool:
        """Whether recording works (the microphone bar says why not)."""
        return self.recording.mic_ok

    @mic_ok.setter
    def mic_ok(self, ok: bool) -> None:
        self.recording.mic_ok = ok

    def is_recording(self) -> bool:
        """A recording is running."""
        return self.recording.is_recording()

    def toggle_record(self) -> None:
        """Start recording, or stop and decode the recording."""
        if self.is_recording():
            self.stop_recording()
        else:
            self.start_recording()

    def start_recording(self) -> None:
        """Start the microphone for a new take (errors go to the banner). Earlier takes stay
        in the takes list."""
        try:
            self.recording.start()
        except RecordingError as exc:
            self.tab.show_error(str(exc))
            return
        self.tab.clear_error()
        self.tab.input_area.info_label.setText(f"Recording take {self.recording.next_take}…")
        self.tab.statusMessage.emit("Recording… press Stop (Ctrl+R) to decode")
        self.tab.update_buttons()

    def stop_recording(self) -> None:
        """Stop the microphone; the recording becomes a new take, the input, and is decoded.

        A recording of 5 minutes or more (``RecordingBar.finishes_later``) is stopped on a
        worker (the run controller's slot "take-N"): the recorder's last conversion of the
        whole take and its int16 copy would hold the GUI thread (~150 ms for an hour's
        int16 alone). The take is in the takes list at once (its float32 audio up to Stop);
        the finished audio replaces it when the worker ends, and the take then becomes the
        input unless another input was chosen meanwhile."""
        if self.recording.finishes_later():
            begun = self.recording.begin_finish()
            if begun is not None:
                self._finish_on_worker(*begun)
                return
        take = self.finish_recording()
        if take is not None:
            self.select_take(self.recording.takes.index(take))

    def _finish_on_worker(self, take: Take, rec: Any) -> None:
        from ..run_controller import Callbacks

        self._wanted = (take, self.tab.audio)
        slot = f"take-{take.number}"

        def gen(cancel):
            yield RecordingBar.complete(rec)

        def done(result) -> None:
            self._settled(take, *result)

        def failed(message: str) -> None:  # nothing more could be read: the take keeps its audio up to Stop
            self._settled(take, None, f"Finishing the recording failed ({message.rstrip('.')}); the "
                                      "{seconds} s recorded up to Stop are kept")

        def ended() -> None:  # cancelled (the window closes): the take keeps its audio up to Stop
            if take.finishing:
                self.recording.settle(take)

        self.tab.controller.start(slot, gen, Callbacks(done, failed, ended), name=f"finish-take-{take.number}")
        self.tab.input_area.info_label.setText(
            f"Finishing take {take.number} ({len(take.audio) / SAMPLE_RATE:.0f} s): keeping it as 16-bit audio…")
        self.tab.statusMessage.emit(f"Finishing take {take.number}…")
        self.update_takes()

    def _settled(self, take: Take, audio: Any, message: str | None) -> None:
        """A finishing take's worker ended: its audio is final; make it the input if it is
        still wanted (no other input chosen, no recording running)."""
        self.recording.settle(take, audio, message)
        wanted, self._wanted = self._wanted, None
        if (wanted is not None and wanted[0] is take and self.tab.audio is wanted[1]
                and take in self.recording.takes and not self.is_recording()):
            self.select_take(self.recording.takes.index(take))
        else:
            self.update_takes()
            if take is self.recording.current:
                self.tab.show_input()

    def finish_pending(self, wait_ms: int = 60000) -> None:
        """Wait for the takes still finishing on workers and settle them now (before the
        window closes or the takes are saved: a take is saved whole)."""
        controller = self.tab.controller
        self._wanted = None  # settled only: no decode starts now
        for take in [t for t in self.recording.takes if t.finishing]:
            handle = controller.handle(f"take-{take.number}")
            if handle is not None:
                handle.wait(wait_ms)
        controller.drain()

    def finish_recording(self) -> Take | None:
        """Stop the recorder and keep what it recorded as a new take (None if nothing usable)."""
        try:
            take = self.recording.finish()
        except RecordingError as exc:
            self.tab.show_error(str(exc))
            self.tab.show_input()
            self.tab.update_buttons()  # Open…, Sample and Save… come back after a failed stop
            return None
        if take is not None:
            self.update_takes()
        else:
            self.tab.update_buttons()
        return take

    def _show_live_audio(self, audio: np.ndarray) -> None:
        self.tab.input_area.show_wave(audio)
        self.tab.input_area.info_label.setText(f"Recording take {self.recording.next_take}… {len(audio) / SAMPLE_RATE:.1f} s")

    def discard_recording(self) -> bool:
        """Throw a running recording away (the input stays); False when none runs."""
        if not self.recording.drop():
            return False
        self.tab.show_input()
        self.tab.update_buttons()
        self.tab.statusMessage.emit("Recording discarded")
        return True

    # --------------------------------------------------------------- takes
    def discard_current(self) -> None:
        """Remove the take that is the input from the takes list (it is the input no more)."""
        take = self.recording.current
        if take is not None and take in self.recording.takes:
            self.recording.takes.remove(take)
            self.tab.statusMessage.emit(f"Discarded {take.label()}")
        self.recording.current = None

    def takes(self) -> list[Take]:
        """The kept recordings, oldest first."""
        return list(self.recording.takes)

    def current_take(self) -> Take | None:
        """The take that is the input, or None (the input is a file, or there is none)."""
        return self.recording.current

    def unsaved_takes(self) -> list[Take]:
        """Takes not saved to a file yet."""
        return self.recording.unsaved()

    def select_take(self, index: int) -> None:
        """Make take number ``index`` (0-based, in :meth:`takes`) the input and decode it."""
        takes = self.recording.takes
        if not 0 <= index < len(takes) or self.is_recording():
            self.update_takes()
            return
        take = takes[index]
        if take.finishing:  # made the input when its worker ends (its int16 audio, not made here)
            self._wanted = (take, self.tab.audio)
            self.update_takes()
            return
        if self.tab.set_audio(take.audio, take.label().split(" · ")[0], from_recording=True):
            self.recording.current = take
            self.update_takes()

    def update_takes(self) -> None:
        """Show the takes list as it is now, and the buttons that go with it."""
        self.recording.show_takes()
        self.tab.update_buttons()

    def save_to(self, path: str | Path, take: Take | None = None) -> bool:
        """Write ``take`` (default: the current input) to ``path`` (wav). True on success;
        the take is then marked saved. Errors go to the banner (one sentence)."""
        audio = take.audio if take is not None else self.tab.audio
        take = take if take is not None else self.recording.current
        path = Path(path)
        try:
            from core.inputs.audio import save_wav

            save_wav(str(path), audio)
        except Exception as exc:  # noqa: BLE001 - AudioError: a sentence for the user
            text = str(exc).strip() or type(exc).__name__
            self.tab.show_error(text if path.name in text else f"Could not save {path.name}: {text}")
            return False
        QSettings().setValue("speech/save_dir", str(path.parent))
        if take is not None:
            take.saved_to = str(path)
            self.update_takes()
            if take is self.recording.current:
                self.tab.show_input()
        self.tab.statusMessage.emit(f"Saved {path.name}")
        return True

    def save_recording(self) -> bool:
        """Save the input (the current take, or the opened file's audio) as a 16 kHz wav
        file, asking where. True if saved."""
        tab = self.tab
        if not tab.has_input() or self.is_recording():
            return False
        take = self.recording.current
        stem = f"take{take.number}" if take is not None else (Path(tab.source_name).stem or "audio")
        path = self.dialogs.ask_save_path(tab, f"Save {take.label() if take else tab.source_name}",
                                          self._save_suggestion(stem))
        return bool(path) and self.save_to(path)

    def _save_suggestion(self, stem: str) -> str:
        folder = Path(str(QSettings().value("speech/save_dir", str(Path.home()))))
        return str(folder / f"{stem}.wav")

    def confirm_close(self) -> bool:
        """Before the window closes: with a recording running or takes not saved, ask
        Save / Discard / Cancel (``dialogs.ask_unsaved``). Save stops a running recording (it
        becomes a take) and asks where to save each unsaved take. False keeps the window
        open (Cancel, or a save dialog cancelled or failed); the takes are then all kept."""
        recording = self.is_recording()
        unsaved = self.unsaved_takes()
        if not recording and not unsaved:
            return True
        _show_tab(self.tab)
        parts = []
        if recording:
            parts.append("A recording is running")
        if unsaved:
            names = ", ".join(t.label() for t in unsaved)
            parts.append(f"{names} {'is' if len(unsaved) == 1 else 'are'} not saved")
        text = "; ".join(parts) + "."
        answer = self.dialogs.ask_unsaved(
            self.tab, text, "Save the recordings as wav files, discard them, or cancel and keep the window open."
        )
        if answer == "discard":
            self.recording.drop()
            return True
        if answer != "save":
            return False
        if recording:
            self.finish_recording()  # kept as a take even if a save dialog below is cancelled
        self.finish_pending()  # a take still finishing is saved whole
        for take in self.unsaved_takes():
            suggested = self._save_suggestion(f"take{take.number}")
            path = self.dialogs.ask_save_path(self.tab, f"Save {take.label()}", suggested)
            if not path or not self.save_to(path, take):
                return False
        return True


def _show_tab(widget: QWidget) -> None:
    """Make ``widget`` the current page of the QTabWidget it is in (if any)."""
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QTabWidget) and parent.indexOf(widget) >= 0:
            parent.setCurrentWidget(widget)
            return
        parent = parent.parentWidget()
