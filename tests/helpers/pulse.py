"""A fake microphone for tests: a private PulseAudio server whose default source is a FIFO.

The server runs ``module-pipe-source``: whatever raw s16le 16 kHz mono is written into
its FIFO is what the "microphone" hears. PortAudio reaches it through ALSA's ``pulse``
device (Debian ``libasound2-plugins``), so a test records through exactly the code path
a real microphone takes (``core.inputs.audio.Recorder`` -> sounddevice -> PortAudio -> ALSA ->
PulseAudio).

Two facts shape this helper:

- The pipe source is clocked by its writer: a recording of N seconds only completes
  when N seconds of samples have arrived, and samples written while nobody records are
  dropped. So a feeder thread writes the FIFO *continuously at real-time pace* (20 ms
  blocks), playing queued audio (:meth:`FakeMicrophone.play`) and silence otherwise.
- PortAudio enumerates devices when it initialises, so after the server is up the
  helper re-initialises PortAudio (``sounddevice._terminate(); sounddevice._initialize()``)
  and does it again after the server is gone.

Needs the Debian packages ``pulseaudio pulseaudio-utils libasound2-plugins libportaudio2``;
without them the fixture fails (it does not skip) with a message saying what to install.
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

SAMPLE_RATE = 16_000
"""Rate in Hz of the fake microphone (s16le mono)."""
SOURCE_NAME = "fakemic"
BLOCK = 320  # samples per FIFO write: 20 ms
_INSTALL = "apt-get install -y pulseaudio pulseaudio-utils libasound2-plugins libportaudio2"


class FakeMicrophone:
    """A running PulseAudio server with a FIFO-fed microphone (see module docstring).

    Attributes:
        fifo: path of the FIFO the server reads.
        pid: the server's process id.
        server: the ``PULSE_SERVER`` address clients use.
        device: the PortAudio device name to record from (``"pulse"``).
    """

    device = "pulse"

    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.fifo = self.workdir / "mic.fifo"
        self.runtime = self.workdir / "runtime"
        self.server = f"unix:{self.runtime / 'native'}"
        self.log_path = self.workdir / "pulseaudio.log"
        self._queue: collections.deque[np.ndarray] = collections.deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self.samples_written = 0
        """Samples written into the FIFO so far (speech and silence)."""
        self.feed_error: BaseException | None = None

    # ----------------------------------------------------------- server
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        for d in ("home", "xdg"):
            (self.workdir / d).mkdir(exist_ok=True)
        env.update(
            HOME=str(self.workdir / "home"),
            XDG_RUNTIME_DIR=str(self.workdir / "xdg"),
            XDG_CONFIG_HOME=str(self.workdir / "home" / ".config"),
            PULSE_RUNTIME_PATH=str(self.runtime),
            PULSE_STATE_PATH=str(self.workdir / "state"),
        )
        env.pop("PULSE_SERVER", None)
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        return env

    def _pactl(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, PULSE_SERVER=self.server, PULSE_COOKIE=str(self.workdir / "cookie"))
        return subprocess.run(["pactl", *args], env=env, capture_output=True, text=True, timeout=10)

    def _log_tail(self) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-15:])
        except OSError:
            return "(no log)"

    def start(self, timeout_s: float = 15.0) -> None:
        """Start the server, wait until the ``fakemic`` source exists, start the feeder."""
        exe = shutil.which("pulseaudio")
        if exe is None or shutil.which("pactl") is None:
            pytest.fail(f"The fake microphone needs PulseAudio (pulseaudio, pactl not found). Install it: {_INSTALL}")
        self.runtime.mkdir(parents=True, exist_ok=True)
        # module-pipe-source creates the FIFO itself and refuses to load if it exists.
        self.fifo.unlink(missing_ok=True)
        cmd = [
            exe,
            "--daemonize=no",
            "--exit-idle-time=-1",
            "--disallow-exit",
            "-n",  # no default.pa: only the modules below
            "--log-target=stderr",
            "--load=module-native-protocol-unix auth-anonymous=1",
            "--load=module-null-sink sink_name=nullsink",
            f"--load=module-pipe-source source_name={SOURCE_NAME} file={self.fifo} "
            f"format=s16le rate={SAMPLE_RATE} channels=1",
        ]
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(cmd, env=self._env(), stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while True:
            if self._proc.poll() is not None:
                pytest.fail(f"pulseaudio exited with code {self._proc.returncode}:\n{self._log_tail()}")
            if self.fifo.exists() and (self.runtime / "native").exists():
                r = self._pactl("list", "sources", "short")
                if r.returncode == 0 and SOURCE_NAME in r.stdout:
                    break
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"PulseAudio did not offer the '{SOURCE_NAME}' source within {timeout_s} s:\n{self._log_tail()}")
            time.sleep(0.05)
        r = self._pactl("set-default-source", SOURCE_NAME)
        if r.returncode != 0:
            self.stop()
            pytest.fail(f"pactl set-default-source {SOURCE_NAME} failed: {r.stderr.strip()}")
        self._thread = threading.Thread(target=self._feed, name="fake-mic-feeder", daemon=True)
        self._thread.start()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def stop(self) -> None:
        """Stop the feeder and the server (SIGTERM, then SIGKILL after 5 s)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    # ----------------------------------------------------------- feeder
    def play(self, audio: np.ndarray) -> float:
        """Queue ``audio`` (float (n,) in [-1, 1] at 16 kHz, or int16) for the microphone.

        Returns:
            Seconds of audio queued in total, i.e. how long until it has all been "heard".
        """
        a = np.asarray(audio)
        if a.ndim != 1:
            raise ValueError(f"play() takes mono audio (n,), got shape {a.shape}")
        if a.dtype != np.int16:
            a = np.round(np.clip(a.astype(np.float64), -1.0, 1.0) * 32767.0).astype(np.int16)
        with self._lock:
            self._queue.append(a)
            self._idle.clear()
            pending = sum(len(x) for x in self._queue)
        return pending / SAMPLE_RATE

    def wait_played(self, timeout_s: float = 60.0) -> None:
        """Block until everything queued with :meth:`play` has been written to the FIFO."""
        if not self._idle.wait(timeout_s):
            raise TimeoutError(f"the fake microphone did not finish playing within {timeout_s} s")
        if self.feed_error is not None:
            raise RuntimeError(f"the fake microphone's feeder failed: {self.feed_error!r}")

    def _next_block(self) -> np.ndarray:
        out = np.zeros(BLOCK, dtype=np.int16)
        filled = 0
        with self._lock:
            while filled < BLOCK and self._queue:
                head = self._queue[0]
                n = min(BLOCK - filled, len(head))
                out[filled : filled + n] = head[:n]
                filled += n
                if n == len(head):
                    self._queue.popleft()
                else:
                    self._queue[0] = head[n:]
            if not self._queue:
                self._idle.set()
        return out

    def _feed(self) -> None:
        """Write 20 ms blocks at real-time pace until stopped (queued audio, else silence)."""
        try:
            fd = os.open(self.fifo, os.O_WRONLY)
        except OSError as e:
            self.feed_error = e
            self._idle.set()
            return
        try:
            t0 = time.monotonic()
            while not self._stop.is_set():
                os.write(fd, self._next_block().astype("<i2").tobytes())
                self.samples_written += BLOCK
                ahead = t0 + self.samples_written / SAMPLE_RATE - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
                elif ahead < -0.5:  # fell far behind (CPU starved): resynchronise
                    t0 = time.monotonic() - self.samples_written / SAMPLE_RATE
        except OSError as e:  # server gone (EPIPE)
            if not self._stop.is_set():
                self.feed_error = e
        finally:
            os.close(fd)
            self._idle.set()


def _reinit_portaudio() -> None:
    """Make PortAudio re-scan devices (it enumerates them once, at initialisation)."""
    try:
        import sounddevice as sd
    except OSError as e:
        pytest.fail(f"PortAudio is missing ({e}). Install it: {_INSTALL}")
    sd._terminate()
    sd._initialize()


@pytest.fixture
def fake_mic() -> Iterator[FakeMicrophone]:
    """A PulseAudio fake microphone, made the default input; PortAudio re-scanned to see it.

    Yields a :class:`FakeMicrophone`; ``mic.play(audio)`` queues 16 kHz audio, and
    PortAudio's ``"pulse"`` (and ``"default"``) device records it. The server is
    stopped (by pid) and PortAudio re-scanned at teardown.
    """
    workdir = Path(tempfile.mkdtemp(prefix="fakemic-"))
    mic = FakeMicrophone(workdir)
    with pytest.MonkeyPatch.context() as mp:
        # Client side (libpulse inside the ALSA plugin, pactl): talk to our server only.
        mp.setenv("PULSE_SERVER", mic.server)
        mp.setenv("PULSE_COOKIE", str(workdir / "cookie"))
        try:
            mic.start()
            _reinit_portaudio()
            yield mic
        finally:
            mic.stop()
    try:
        _reinit_portaudio()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
