"""Live mode in the Speech tab (issue 23 §1, §4): decode while recording, or play a file as
live input, through a streaming policy (``core.streaming``).

An object of :class:`gui.tabs.speech.SpeechTab` (``tab.live_mode``, :class:`LiveMode`). It owns:

- the "Live" box, the policy picker beside Record and LocalAgreement's prompt length and forced
  prefix in the Live view's head row (kept in QSettings: ``speech/live``, ``speech/live_policy``,
  ``speech/live_prompt_tokens``, ``speech/live_forced_prefix``);
- the Live view (``gui.widgets.live_view.LiveView``, a tab beside the heatmap);
- one live session at a time: the microphone's audio (the recording bar's ``liveAudio``, every
  200 ms) or a file played at real time goes to a ``core.streaming.StreamDriver`` that runs in
  the worker of the run controller's slot "live" (the same slot pattern as "open" / "align";
  one model, one decoding thread: the tab's decode waits for it). The worker yields the
  driver's events and a :class:`~gui.widgets.live_view.LiveTick` per chunk; the view takes
  them from the controller's pump and draws once per frame.

The recording itself is untouched: Record / Stop keep the take exactly as without Live
(``gui.tabs.speech_takes``). Stop ends the live input: the worker feeds the take's last
samples and finishes the driver, which commits what was tentative (mid-utterance too); then
the take is decoded offline as always. A file played as live becomes the input when it ends.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from PySide6.QtCore import QSettings, QTimer
from PySide6.QtWidgets import QCheckBox, QComboBox, QFileDialog, QSpinBox, QWidget

from core.catalog import AUDIO_SUFFIXES

from ..widgets.elided_combo import ElidedComboBox
from ..widgets.live_view import LiveTick, LiveView
from .base import SAMPLES_DIR

#: the policies the picker offers: (spec for ``core.streaming.parse_policy``, label)
POLICY_CHOICES = (
    ("local-agreement:2", "local-agreement:2"),
    ("align-att:25", "align-att"),
    ("fixed-window", "fixed-window"),
)
#: seconds of new audio between decodes. The CLI's local-agreement default is 0.5 s (lower latency,
#: twice the decodes); the Live mode keeps 1.0 s for every policy: under a loaded CPU (load 10 on 2
#: cores) the tiny.en live test committed nothing before its 7.5 s clip ended at 0.5 s in 2 of 3
#: runs, and passed at 1.0 s (session 11)
STEP_S = 1.0
#: a recording whose audio has not grown for this long (s) lost its device (unplugged)
STALL_S = 3.0
LIVE_TIP = (
    "Live: with this on, Record decodes while you speak. A streaming policy decodes the audio heard so far every "
    f"{STEP_S:g} s and decides which tokens are final (committed, solid) and which may still change (tentative, "
    "grey); the Live tab beside the heatmap shows them, the buffer the decoder sees and each word's latency. "
    "The recording is kept as a take as always, and decoded in full after Stop. File → Play file as live input "
    "does the same with a file played at real time."
)
POLICY_TIP = (
    "Streaming policy. local-agreement:2 (ufal/whisper_streaming, Macháček et al. 2023): re-decode the buffer, "
    "commit the prefix two consecutive decodes agree on. align-att (ufal/SimulStreaming, AlignAtt, Papi et al. "
    "2023): emit a token only while the alignment heads do not attend the last 25 frames (0.5 s); else wait "
    "for audio. A last word that may be cut stays tentative until the next decode (unless the decode stopped "
    "at a word start or punctuation, or the audio ends in silence). Both commit nothing before 2 s of audio. "
    "fixed-window (whisper.cpp stream): decode a sliding window, commit what falls out of it."
)

#: the prompt spin box's largest value: Whisper keeps at most the last 223 ids of previous text
#: (``max_target_positions // 2 - 1``), so more is the same as "all"
PROMPT_MAX = 223
PROMPT_TIP = (
    "Prompt length (local-agreement only): each decode of the buffer is prompted with the last N tokens of the "
    "text committed before the buffer (the audio already trimmed away), as Whisper conditions a window on the "
    "previous one. ufal/whisper_streaming keeps the last 200 characters of that text (about 45 tokens of English); "
    "\"all\" keeps all of it (Whisper itself keeps at most the last 223 tokens). A shorter prompt lets a "
    "mistake in the committed text mislead the next decodes less; a longer one gives more context."
)
PROMPT_OFF_TIP = "Prompt length: local-agreement only; align-att and fixed-window take none."
FORCED_TIP = (
    "Forced prefix (local-agreement only). Checked (default): the words already committed inside the buffer are "
    "fed as the start of each decode, so a new hypothesis can only extend them. Unchecked: each step decodes the "
    "buffer afresh and drops what repeats the committed text by word timing, as ufal/whisper_streaming does; "
    "slower (more tokens to generate each step; session 15's bench, tiny.en at a 0.5 s step: mean latency "
    "~1.7 s against ~1.2 s forced)."
)
FORCED_OFF_TIP = "Forced prefix: local-agreement only; align-att and fixed-window do not take it."


def ask_live_file(parent: QWidget | None, directory: str) -> str:
    """Ask for an audio file to play as live input (``QFileDialog``); "" when cancelled
    (tests replace this function)."""
    pattern = " ".join(f"*{s}" for s in AUDIO_SUFFIXES)
    path, _ = QFileDialog.getOpenFileName(parent, "Play file as live input", directory, f"Audio ({pattern})")
    return path


class LiveFeed:
    """The microphone's audio on its way to the worker: the GUI thread :meth:`push`es chunks,
    the worker takes everything waiting at once (:meth:`chunks`), so a decoder that was busy
    gets the backlog in one piece, as the driver expects. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._pending: list[np.ndarray] = []
        self.ended = False  #: the input ended (Stop): nothing more comes

    def push(self, chunk: np.ndarray) -> None:
        """Queue ``chunk`` (float32 (n,), 16 kHz); empty chunks are ignored."""
        if len(chunk):
            with self._lock:
                self._pending.append(np.asarray(chunk, dtype=np.float32))
            self._wake.set()

    def end(self) -> None:
        """The input ended: :meth:`chunks` returns once the queue is empty."""
        self.ended = True
        self._wake.set()

    def chunks(self, cancel=lambda: False) -> Iterator[np.ndarray]:
        """Yield what waits, joined, as it arrives, until :meth:`end` (or ``cancel()``)."""
        while not cancel():
            with self._lock:
                pending, self._pending = self._pending, []
                ended = self.ended
            if pending:
                yield np.concatenate(pending)
            elif ended:
                return
            else:
                self._wake.wait(0.05)
                self._wake.clear()


@dataclass(eq=False)
class LiveSession:
    """One live stream: ``kind`` "mic" (a recording) or "file" (a file played as live)."""

    kind: str
    name: str
    feed: LiveFeed = field(default_factory=LiveFeed)
    take_number: int = 0  #: the take being recorded (mic)
    pushed: int = 0  #: samples of the recording fed so far (mic)
    path: Path | None = None  #: the file (file)
    speed: float = 1.0  #: play speed (file; 1 = real time)
    audio: np.ndarray | None = None  #: the file's audio, once read (file)
    started: bool = False  #: its worker started
    waiting: bool = False  #: its start waits for the decoding workers (``RunController.defer``)
    finished: Any = None  #: its StreamFinished
    aborted: bool = False
    decode_after: bool = False  #: a decode of the tab waits for the session's end
    heard: tuple[float, float] = (0.0, 0.0)  #: (seconds recorded, when that was last seen to grow) (mic)
    note: str = ""  #: for the banner when the session has ended (the device was lost)
    input_before: Any = None  #: the tab's input when the session started (file: replaced at the end unless changed)


class LiveMode:
    """Live mode of the Speech tab (see the module docstring). The tab calls :meth:`attach`
    once its layout exists; it forwards Record/Stop (:meth:`sync`), its decode requests
    (:meth:`holds_model`), Discard (:meth:`abort`), Esc (:meth:`stop`) and File → Play file
    as live input (:meth:`play_file`)."""

    def __init__(self, tab: Any) -> None:
        from core.streaming import Committed, FellBehind, StreamFinished, Tentative, Trimmed, Waited

        self.tab = tab
        #: the stream's items wait for the frame's batch (the view draws once per frame)
        self.batched_events = (LiveTick, Tentative, Committed, Trimmed, Waited, FellBehind, StreamFinished)
        self.session: LiveSession | None = None
        self._status = ""
        self._device_watch = QTimer()  # a live recording whose device stops delivering audio ends
        self._device_watch.setInterval(500)
        self._device_watch.timeout.connect(self._check_device)

    # ------------------------------------------------------------ building
    def attach(self) -> None:
        """The Live box and policy picker beside Record, the Live view beside the heatmap."""
        tab = self.tab
        self.check = QCheckBox("Live")
        self.check.setToolTip(LIVE_TIP)
        self.policy_combo = ElidedComboBox()
        for spec, label in POLICY_CHOICES:
            self.policy_combo.addItem(label, spec)
        self.policy_combo.setToolTip(POLICY_TIP)
        # as wide as its longest name where the row has room (1400 px and up); narrower at 1280 px,
        # down to "fixed-window" in full, the picked name then cut with "…" (the list in full)
        self.policy_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.policy_combo.setMinimumWidth(self.policy_combo.fontMetrics().horizontalAdvance("fixed-window") + 34)
        from core.streaming.local_agreement import PROMPT_TOKENS

        self.prompt_spin = QSpinBox()
        self.prompt_spin.setRange(0, PROMPT_MAX)  # 0: "all"
        self.prompt_spin.setSpecialValueText("prompt: all")
        self.prompt_spin.setPrefix("prompt: ")
        self.prompt_spin.setValue(PROMPT_TOKENS or 0)
        from core.streaming.local_agreement import FORCED_PREFIX

        self.forced_check = QCheckBox("forced prefix")
        self.forced_check.setChecked(FORCED_PREFIX)
        self.policy_combo.currentIndexChanged.connect(self._policy_changed)
        tab.recording.add_beside_record(self.check, self.policy_combo)
        tab.record_button.clicked.connect(self.sync)  # after SpeechTakes.toggle_record (connected first)
        tab.recording.liveAudio.connect(self._heard)
        self.view = LiveView()
        self.view.stopRequested.connect(self.stop)
        self.view.add_control(self.prompt_spin)  # the record row has no room left at 1280 px
        self.view.add_control(self.forced_check)
        self._policy_changed()
        tab.add_inspector_view(self.view, "Live")
        tab.inspector_tabs.setTabToolTip(tab.inspector_tabs.indexOf(self.view), LIVE_TIP)
        tab.controller.add_frame_listener(self._frame)
        tab.run.cleared.connect(lambda: self.mark_earlier_run(False))  # the next offline run, or no input

    def mark_earlier_run(self, on: bool) -> None:
        """Mark the token stream, top-k and heatmap as showing the last offline run (``on``, while a
        live session runs; at its end, until the offline run of a file played or a take clears the
        run; a session ending without one unmarks them) or unmark them. The run stays, explorable;
        nothing is marked when it has no steps."""
        tab = self.tab
        note = short = None
        if on and len(tab.run):
            name = getattr(tab, "source_name", "") or "the input"
            note = f"last offline run: {name} — live decode is in the Live view"
            short = f"Last offline run ({name})"
        tab.stream.set_earlier_note(note)
        tab.heatmap.set_earlier_note(note)
        tab.topk.set_earlier_note(short)

    # ------------------------------------------------------------ settings
    def policy(self) -> str:
        """The picked policy spec ("local-agreement:2", "align-att:25", "fixed-window")."""
        return str(self.policy_combo.currentData())

    def prompt_tokens(self) -> int | None:
        """The prompt length LocalAgreement gets (the spin box; None: "all")."""
        return self.prompt_spin.value() or None

    def forced_prefix(self) -> bool:
        """Whether LocalAgreement forces the committed words inside the buffer as each decode's
        start (the "forced prefix" box; unchecked: whisper_streaming's free re-decode)."""
        return self.forced_check.isChecked()

    def _policy_changed(self) -> None:
        """The prompt length and forced prefix are LocalAgreement's only: off (with a tooltip
        saying so) for the others."""
        on = self.policy().startswith("local-agreement")
        if self.session is None:  # a running session keeps its own policy's legend
            self.view.set_policy(self.policy())
        self.prompt_spin.setEnabled(on and self.session is None)
        self.prompt_spin.setToolTip(PROMPT_TIP if on else PROMPT_OFF_TIP)
        self.forced_check.setEnabled(on and self.session is None)
        self.forced_check.setToolTip(FORCED_TIP if on else FORCED_OFF_TIP)

    def save_settings(self, s: QSettings) -> None:
        s.setValue("speech/live", self.check.isChecked())
        s.setValue("speech/live_policy", self.policy())
        s.setValue("speech/live_prompt_tokens", self.prompt_spin.value())
        s.setValue("speech/live_forced_prefix", self.forced_check.isChecked())

    def restore_settings(self, s: QSettings) -> None:
        self.check.setChecked(str(s.value("speech/live", False)).lower() in ("true", "1"))
        i = self.policy_combo.findData(str(s.value("speech/live_policy", POLICY_CHOICES[0][0])))
        self.policy_combo.setCurrentIndex(max(i, 0))
        try:
            self.prompt_spin.setValue(int(s.value("speech/live_prompt_tokens", self.prompt_spin.value())))
        except (TypeError, ValueError):
            pass  # an unreadable value keeps the default
        forced = str(s.value("speech/live_forced_prefix", self.forced_check.isChecked())).lower()
        if forced in ("true", "1", "false", "0"):  # anything else keeps the default
            self.forced_check.setChecked(forced in ("true", "1"))

    # ------------------------------------------------------------ state
    def running(self) -> bool:
        """A live session exists (its worker may still be starting or finishing)."""
        self._drop_unstartable()
        return self.session is not None

    def holds_model(self) -> bool:
        """A live session decodes with the tab's model: a decode must wait for its end. The
        caller's decode is remembered and started when the session ends."""
        self._drop_unstartable()
        if self.session is None:
            return False
        self.session.decode_after = True
        return True

    def refusal(self, what: str) -> str:
        """Why ``what`` (a fork, what-if, lanes) cannot start now ("" if it can)."""
        self._drop_unstartable()
        return (f"{what} waits: a live session is decoding with the model; press ■ Stop first"
                if self.session is not None else "")

    def _drop_unstartable(self) -> None:
        """A session whose deferred start was dropped (a model load or a cancel forgot the run
        controller's deferred start before the decoding worker ended) will never start: it is
        forgotten, so it holds no decode back (a decode it held starts now)."""
        s = self.session
        if s is not None and s.waiting and not s.started and not s.aborted and not self.tab.controller.deferred():
            self.tab.statusMessage.emit("Live: the session was dropped before it began decoding (a model load or "
                                        "another input took the model); record again with Live")
            self._end_unstarted(s)

    def _end_unstarted(self, s: LiveSession) -> None:
        """A session that never began decoding ends: nothing to finish; a decode of the tab that
        waited for it starts now (the take recorded meanwhile, the file opened meanwhile)."""
        self._forget(s)
        if s.decode_after and self.tab.has_input():
            self.tab.request_decode()

    # ------------------------------------------------------------ the microphone
    def sync(self) -> None:
        """Follow the recording (after Record/Stop): a recording that started with Live ticked
        starts a live session; one that stopped ends its session's input (the take's last
        samples go in, the driver commits what is tentative)."""
        bar, s = self.tab.recording, self.session
        recording = bar.is_recording()
        if recording and s is None and self.check.isChecked():
            self._start_mic()
        elif recording and s is not None and s.kind == "file" and self.check.isChecked():
            self.stop()
            self.tab.statusMessage.emit("The file played as live input was stopped; this recording is not live")
        elif not recording and s is not None and s.kind == "mic" and not s.feed.ended:
            take = bar.takes[-1] if bar.takes and bar.takes[-1].number == s.take_number else None
            if take is not None:  # what arrived after the last 200 ms tick
                s.feed.push(take.audio[s.pushed:])
                s.pushed = len(take.audio)
            s.feed.end()
            if not s.started:  # it never began decoding: nothing to finish (a held decode starts)
                self._end_unstarted(s)

    def _heard(self, audio: np.ndarray) -> None:
        """The recording so far (every 200 ms): its new samples go to the live session."""
        s = self.session
        if s is not None and s.kind == "mic" and not s.feed.ended and len(audio) > s.pushed:
            s.feed.push(audio[s.pushed:])
            s.pushed = len(audio)

    def _start_mic(self) -> None:
        number = self.tab.recording.next_take
        session = LiveSession("mic", f"take {number} (recording)", take_number=number,
                              heard=(0.0, time.perf_counter()))
        if self._start(session):
            self._device_watch.start()

    def _check_device(self) -> None:
        """Every 500 ms of a live recording: a recording that has not grown for :data:`STALL_S`
        seconds lost its device (unplugged, the sound server stopped): the recording is stopped
        (what it recorded is kept as a take), the live session commits what it has, and the
        banner says so."""
        s, bar = self.session, self.tab.recording
        if s is None or s.kind != "mic" or s.feed.ended or not bar.is_recording():
            self._device_watch.stop()
            return
        seconds = getattr(bar.recorder, "duration_s", None)
        seconds = float(seconds) if isinstance(seconds, (int, float)) else s.pushed / 16000
        now = time.perf_counter()
        if seconds > s.heard[0]:
            s.heard = (seconds, now)
            return
        if now - s.heard[1] < STALL_S:
            return
        self._device_watch.stop()
        number = s.take_number
        self.tab.toggle_record()  # Stop: the take is kept, the live input ends (sync)
        kept = any(t.number == number for t in self.tab.takes())
        failure = self.tab.pop_recording_failure()  # the stream's own error, when stopping it failed
        s.note = (
            f"The microphone stopped delivering audio ({STALL_S:g} s without a sample: unplugged, or the sound "
            "server stopped), so the live session ended with what it had heard" +
            (f"; the recording is kept as take {number}." if kept else "; nothing usable was recorded.") +
            " Check the input device and record again." + (f"\n{failure}" if failure else ""))
        self.tab.show_error(s.note)  # said again when the session has ended (the take's decode clears the banner)

    # ------------------------------------------------------------ a file as live input
    def play_file(self, path: str | Path | None = None, speed: float = 1.0) -> bool:
        """File → Play file as live input: ``path`` (None: ask) played at ``speed`` x real time
        through the live session, as a microphone would deliver it; the file becomes the input
        when it ends. False (with the reason in the banner) when it cannot start."""
        tab = self.tab
        if tab.is_recording():
            tab.show_error("Cannot play a file as live input while recording: press ■ Stop (Ctrl+R) first.")
            return False
        if self.session is not None:
            tab.statusMessage.emit("A live session runs: press ■ Stop in the Live tab first")
            return False
        if tab.model is None:
            tab.show_error("Load a Whisper model first (the model box, then Load); then play the file as live input.")
            return False
        if path is None:
            path = ask_live_file(tab, str(QSettings().value("speech/live_dir", str(SAMPLES_DIR))))
            if not path:
                return False
        path = Path(path)
        if not path.is_file():
            tab.show_error(f"{path.name}: no such file. Pick an audio file (wav, flac, ogg, mp3) to play as live input.")
            return False
        QSettings().setValue("speech/live_dir", str(path.parent))
        return self._start(LiveSession("file", f"{path.name} played as live input", path=path, speed=speed))

    # ------------------------------------------------------------ the worker
    def make_decoder(self, model: Any, options: Any) -> Any:
        """The ``core.streaming.base.Decoder`` a session decodes with (tests replace it).

        Raises:
            ValueError: a language, task or strategy the streaming decoder cannot do.
        """
        from core.streaming.decoder import WhisperDecoder

        if options.strategy == "speculative" and (options.draft == "branch" or options.draft.startswith("model")):
            raise ValueError(f"live decoding drafts with ngram or early-exit:L; the draft '{options.draft}' needs "
                             "an earlier run or a second model per buffer: choose ngram")
        return WhisperDecoder(model, options, language=self.tab.language(), task=self.tab.task())

    def make_driver(self, decoder: Any, realtime: float) -> Any:
        """The ``core.streaming.StreamDriver`` of a session (the picked policy, a step of
        :data:`STEP_S` s, LocalAgreement's prompt length from the spin box and forced prefix from
        its box; the audio arrives at ``realtime`` x real time)."""
        from core.streaming import StreamDriver, parse_policy

        settings = ({"prompt_tokens": self.prompt_tokens(), "forced_prefix": self.forced_prefix()}
                    if self.policy().startswith("local-agreement") else {})
        return StreamDriver(parse_policy(self.policy(), step_s=STEP_S, **settings), decoder, realtime=realtime)

    def _start(self, session: LiveSession) -> bool:
        tab = self.tab
        if tab.model is None:
            tab.show_error("Live needs a loaded Whisper model: load one (the model box, then Load) and record again. "
                           "The recording runs and is kept as a take.")
            return False
        try:
            driver = self.make_driver(self.make_decoder(tab.model, tab.options_panel.options()),
                                      session.speed if session.kind == "file" else 1.0)
        except ValueError as exc:
            tab.show_error(f"Live decoding cannot start: {exc}")
            return False
        session.input_before = tab.audio
        self.session = session
        self.view.reset(session.name)
        self.view.set_policy(driver.policy.name)
        self.view.set_active(True)
        self.check.setEnabled(False)
        self.policy_combo.setEnabled(False)
        self.prompt_spin.setEnabled(False)
        self.forced_check.setEnabled(False)
        tab.inspector_tabs.bring(self.view)
        self.mark_earlier_run(True)  # the views keep the last offline run: they say so, dimmed
        tab.lanes.cancel()  # one decoding thread: the tab's decode and lanes stop, the session starts after them
        tab.stop_decode()

        def start() -> None:
            if self.session is not session or session.aborted:
                return
            session.started = True
            tab.live.reset()  # the status bar's figures are no longer the last offline run's
            tab.statsChanged.emit(tab.stats_dict(None))
            tab.controller.start("live", lambda cancel: self._stream(session, driver, cancel), self, name="live")
            tab.busyChanged.emit(True, f"Live · {self.policy()}")

        session.waiting = True
        tab.controller.defer(start)
        return True

    @staticmethod
    def _stream(session: LiveSession, driver: Any, cancel) -> Iterator[Any]:
        """The worker: chunks (the microphone's, or the file played at real time) into the
        driver; its events and a LiveTick per chunk out; at the end of the input, the flush."""
        if session.kind == "file":
            from core.inputs.audio import load_audio
            from core.streaming import play

            session.audio = load_audio(session.path, label=session.path.name)
            chunks = _until(play(session.audio, speed=session.speed), lambda: session.feed.ended)
        else:
            chunks = session.feed.chunks(cancel)
        empty = np.zeros(0, np.float32)
        for chunk in chunks:
            if cancel():
                return
            events = driver.feed(chunk)
            yield _tick(driver, chunk)
            yield from events
        if cancel():
            return
        events = driver.finish()
        yield _tick(driver, empty)
        yield from events

    # ------------------------------------------------------------ the run controller's client
    def on_event(self, ev: Any) -> None:
        """One item of the live worker (GUI thread): recorded by the view, drawn at the frame."""
        from core.streaming import FellBehind, StreamFinished

        self.view.take(ev)
        s = self.session
        if isinstance(ev, StreamFinished) and s is not None:
            s.finished = ev
        elif isinstance(ev, FellBehind):
            self.tab.statusMessage.emit("Live: " + self.view.fell_behind_text(ev))

    def on_error(self, message: str) -> None:
        """The live worker failed (a file that would not open, a decoder error)."""
        self.tab.show_error(f"Live decoding stopped: {message}")

    def on_end(self, _handle: Any) -> None:
        """The live worker ended: the view shows the end; a file played as live becomes the
        input; a decode that waited for the model starts."""
        s = self.session
        if s is None:
            return
        self._forget(s)
        tab = self.tab
        summary = f"Live: {len(self.view.words)} words committed · {self.view.stats_text()}"
        unchanged = tab.audio is s.input_before  # the user opened nothing else meanwhile
        if s.kind == "file" and s.finished is not None and s.audio is not None and not s.aborted and unchanged:
            tab.set_audio(s.audio, s.path.name)  # the file is the input now: decoded offline, explorable
            tab.statusMessage.emit(summary)  # after the decode's start, which clears the last run's message
            return
        # no offline run of the played file follows: the views show the run of the input shown again
        self.mark_earlier_run(False)
        if s.kind == "file" and unchanged:
            tab.show_input()  # the waveform shows the input again, not the part of the file played
        if s.decode_after and tab.has_input():
            tab.request_decode()
        if s.finished is not None:
            tab.statusMessage.emit(summary)
        if s.note:
            tab.show_error(s.note)

    def _forget(self, s: LiveSession) -> None:
        if self.session is s:
            self.session = None
        self.view.set_active(False)
        self.check.setEnabled(True)
        self.policy_combo.setEnabled(True)
        self._policy_changed()
        self.view.flush()
        self.tab.busyChanged.emit(self.tab.is_busy(), "")

    def _frame(self) -> None:
        """The end of a pump turn: the view draws; the status bar says the stream's figures; a
        file played as live grows on the input's waveform as a recording does."""
        heard = self.view.heard_s
        self.view.flush()
        s = self.session
        if (s is not None and s.kind == "file" and self.tab.audio is s.input_before
                and heard > s.heard[0] + max(0.19, heard / 200)):  # <= 5 times a second
            s.heard = (heard, time.perf_counter())
            self.tab.input_area.show_wave(self.view.heard_audio())
            # the seconds first: a narrow label cuts the name, not the count ("Playing spee…" at 1280 px)
            self.tab.input_area.info_label.setText(f"{heard:.1f} s · playing {s.path.name} as live input…")
        if self.session is not None and self.session.started and self.view.heard_s > 0:
            text = "Live · " + self.view.stats_text()
            if self.view.messages:  # "skipped 3.2 s to keep up" / "the waiting audio was decoded in one step"
                text += " · " + self.view.note().split(":", 1)[-1].split("(")[0].strip().rstrip(".")
            if text != self._status:
                self._status = text
                self.tab.statusMessage.emit(text)

    # ------------------------------------------------------------ ending
    def stop(self) -> bool:
        """End the live input now (■ Stop, Esc): a recording is stopped as with Record/Stop
        (its take kept); a file stops playing; the driver commits what is tentative. True if
        a session was running."""
        s = self.session
        if s is None:
            return False
        if s.kind == "mic" and self.tab.is_recording():
            self.tab.toggle_record()  # the take is kept; sync() ends the feed
        else:
            s.feed.end()
            if not s.started:
                self._end_unstarted(s)
        return True

    def abort(self) -> bool:
        """Throw the live session away (Discard of the recording, the window closing): its
        worker stops after the current decode and its last events are dropped."""
        s = self.session
        if s is None:
            return False
        s.aborted = True
        s.feed.end()
        if not self.tab.controller.abort("live"):
            self._forget(s)
        return True


def _until(chunks: Iterator[np.ndarray], stopped) -> Iterator[np.ndarray]:
    """``chunks`` until ``stopped()`` (checked before each)."""
    for chunk in chunks:
        if stopped():
            return
        yield chunk


def _tick(driver: Any, chunk: np.ndarray) -> LiveTick:
    return LiveTick(chunk, driver.received_s, driver.start_s, driver.compute_s, driver.shown, driver.revised,
                    driver.decodes)


__all__ = ["LiveFeed", "LiveMode", "LiveSession", "POLICY_CHOICES", "ask_live_file"]
