"""The Speech tab's microphone and takes (gui/tabs/speech.py): the recording row
(:class:`~gui.tabs.recording.RecordingBar`), starting and stopping a recording, the takes
it leaves, choosing one as the input, and writing one to a wav file.

Nothing recorded is lost: each recording becomes a *take* ("take 1 (12.3 s)") in the takes
list and stays there until the user discards it, whatever is opened or recorded meanwhile.
The tab (the class this is mixed into) gives ``set_audio``, ``show_input``, ``show_wave``,
``update_buttons``, ``has_input``, ``info_label``, ``show_error`` / ``clear_error`` and
``statusMessage``; the dialogs that ask about unsaved takes are the tab's
(``gui.tabs.speech.ask_unsaved`` / ``ask_save_path``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PySide6.QtCore import QSettings

from core.catalog import SAMPLE_RATE

from .recording import RecordingBar, RecordingError, Take


class SpeechTakesMixin:
    """Recording and takes of the Speech tab (see module docstring)."""

    def build_recording_bar(self) -> RecordingBar:
        """The microphone row (Record, device, level, takes, Save…, Discard) and its note."""
        bar = self.recording = RecordingBar()
        bar.record_button.clicked.connect(self.toggle_record)
        bar.save_button.clicked.connect(self.save_recording)
        bar.discard_button.clicked.connect(self.discard_input)
        bar.takePicked.connect(self.select_take)
        bar.liveAudio.connect(self._show_live_audio)
        # the bar's controls are the tab's too (tests and the window's shortcuts use them)
        self.record_button, self.device_combo, self.level_meter = bar.record_button, bar.device_combo, bar.level_meter
        self.takes_combo, self.save_button, self.discard_button = bar.takes_combo, bar.save_button, bar.discard_button
        self.mic_label = bar.mic_label
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
            self.show_error(str(exc))
            return
        self.clear_error()
        self.info_label.setText(f"Recording take {self.recording.next_take}…")
        self.statusMessage.emit("Recording… press Stop (Ctrl+R) to decode")
        self.update_buttons()

    def stop_recording(self) -> None:
        """Stop the microphone; the recording becomes a new take, the input, and is decoded."""
        take = self.finish_recording()
        if take is not None:
            self.select_take(self.recording.takes.index(take))

    def finish_recording(self) -> Take | None:
        """Stop the recorder and keep what it recorded as a new take (None if nothing usable)."""
        try:
            take = self.recording.finish()
        except RecordingError as exc:
            self.show_error(str(exc))
            self.show_input()
            self.update_buttons()  # Open…, Sample and Save… come back after a failed stop
            return None
        if take is not None:
            self.update_takes()
        else:
            self.update_buttons()
        return take

    def _show_live_audio(self, audio: np.ndarray) -> None:
        self.show_wave(audio)
        self.info_label.setText(f"Recording take {self.recording.next_take}… {len(audio) / SAMPLE_RATE:.1f} s")

    # --------------------------------------------------------------- takes
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
        if self.set_audio(take.audio, take.label().split(" · ")[0], from_recording=True):
            self.recording.current = take
            self.update_takes()

    def update_takes(self) -> None:
        """Show the takes list as it is now, and the buttons that go with it."""
        self.recording.show_takes()
        self.update_buttons()

    def save_to(self, path: str | Path, take: Take | None = None) -> bool:
        """Write ``take`` (default: the current input) to ``path`` (wav). True on success;
        the take is then marked saved. Errors go to the banner (one sentence)."""
        audio = take.audio if take is not None else self.audio
        take = take if take is not None else self.recording.current
        path = Path(path)
        try:
            from core.inputs.audio import save_wav

            save_wav(str(path), audio)
        except Exception as exc:  # noqa: BLE001 - AudioError: a sentence for the user
            text = str(exc).strip() or type(exc).__name__
            self.show_error(text if path.name in text else f"Could not save {path.name}: {text}")
            return False
        QSettings().setValue("speech/save_dir", str(path.parent))
        if take is not None:
            take.saved_to = str(path)
            self.update_takes()
            if take is self.recording.current:
                self.show_input()
        self.statusMessage.emit(f"Saved {path.name}")
        return True
