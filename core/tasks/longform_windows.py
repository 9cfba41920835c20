"""The audio side of a long-form run (core/tasks/longform.py): the whole clip's log-mel
spectrogram cut into 30 s windows, each window's encoder output (cached), which windows
keep their decoder keys/values in memory, and where a run's windows sat (:class:`WindowPlan`,
:func:`plan_of_run`: what a fork, a what-if or the word alignment of a long-form run needs).

Memory: the decoder's cross-attention keys/values of a window (base: 37 MB) and the
engine's KV cache kept for a fork are held for the last :data:`KV_WINDOWS_KEPT` windows
only (:func:`hold_window_kv`); older windows get them back on demand.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from core.catalog import SAMPLE_RATE
from core.events import RunStats, SegmentEvent
from core.options import DecodingOptions

#: mel frames per second (10 ms hop) and per 30 s window; encoder frames are 2 mel frames
MEL_PER_S = 100
N_FRAMES = 3000
INPUT_STRIDE = 2
#: windows of a long-form run whose decoder cross-attention keys/values and kept KV cache stay
#: in memory (:func:`hold_window_kv`): the one being decoded and the one before it
KV_WINDOWS_KEPT = 2

__all__ = ["INPUT_STRIDE", "KV_WINDOWS_KEPT", "MEL_CHUNK", "MEL_PER_S", "N_FRAMES", "LogMel", "audio_key", "drop_window_kv",
           "encode_window", "hold_window_kv", "log_mel", "WindowPlan", "window_samples", "encode_audio", "plan_of_run"]


def audio_key(audio: np.ndarray) -> str:
    """SHA-1 of the samples' bytes (hex), read in place: ``tobytes()`` copied the whole clip
    (230 MB for an hour of float32) at every run, fork and what-if."""
    from core.inputs.pcm16 import Pcm16Audio

    if isinstance(audio, Pcm16Audio):  # its int16 bytes (not a float32 copy of the whole clip)
        return "pcm16:" + hashlib.sha1(audio.key_bytes()).hexdigest()
    return hashlib.sha1(memoryview(np.ascontiguousarray(audio)).cast("B")).hexdigest()


def drop_window_kv(model, encoded) -> int:
    """Free what decoding kept for one window beside its encoder output: the decoder's
    cross-attention keys and values (``EncoderOutput.extras["whisper_cross_kv"]``, a function
    of the encoder output alone; whisper-base: 6 layers × K and V × 1500 frames × 512, 37 MB
    in float32) and the engine's KV cache of the last run on it (``Engine.kept``, which
    holds them too, plus ~11 MB of self-attention). Both are rebuilt on demand: the backend
    computes the keys and values again on the next decode of this window (a few tens of
    ms), and a fork on it feeds its prompt again instead of reusing the cache.

    Returns:
        the bytes of keys and values released (0 if there were none).
    """
    kv = encoded.extras.pop("whisper_cross_kv", None)
    kept = model.engine.kept.get(id(encoded))
    if kept is not None and kept.encoded is encoded:
        del model.engine.kept[id(encoded)]
    if kv is None:
        return 0
    return sum(t.numel() * t.element_size() for part in kv for t in part)


def hold_window_kv(model, encoded, keep: int = KV_WINDOWS_KEPT) -> None:
    """Mark ``encoded`` (a window's encoder output) as the newest one whose cross-attention
    keys/values and kept KV cache may stay in memory; the windows marked before it beyond
    the last ``keep`` lose theirs (:func:`drop_window_kv`). A long-form run on an hour of
    audio otherwise keeps them for every window still in the encoder cache or the engine's
    kept caches (measured with base: ~12 windows, ~480 MB)."""
    held = [e for e in getattr(model, "_longform_kv_held", []) if e is not encoded] + [encoded]
    for old in held[:-keep] if keep > 0 else held:
        drop_window_kv(model, old)
    model._longform_kv_held = held[-keep:] if keep > 0 else []


class LogMel:
    """The log-mel spectrogram of the whole audio as transformers' feature extractor computes
    it for long-form (``truncation=False, padding="longest"``: normalised over the whole
    clip: values below the clip's maximum - 8 are raised to it), computed a window at a time.

    The whole spectrogram of an hour is 80 × 360,000 float32 (115 MB), and computing it in
    one call (``torch.stft`` of the whole clip) took a transient ~2 GB (measured: +705 MB
    for 20 minutes). Here the clip's maximum is found in chunks of :data:`MEL_CHUNK` frames
    (the first time a window is asked for), and each window's frames are computed when
    asked: the same frames (the STFT's reflect padding at the clip's two ends, a frame's
    samples the same as in one call), so the values equal the one-call ones up to float
    rounding of the filter-bank product. Audio of 30 s or less is short-form: padded to
    30 s of samples and computed in one call, as before.

    Attributes:
        shape: (1, n_mels, n_frames) of the whole spectrogram (n_frames = samples // hop).
    """

    def __init__(self, model, audio: np.ndarray) -> None:
        from core.inputs.pcm16 import Pcm16Audio

        self._fe = model._loaded.feature_extractor
        # a long clip kept as int16 stays so: each window's samples are read as float32 when asked
        self._audio = audio if isinstance(audio, Pcm16Audio) else np.asarray(audio, dtype=np.float32)
        self._full = None
        self._max: float | None = None
        n_mels = int(self._fe.feature_size)
        if len(audio) <= N_FRAMES * SAMPLE_RATE // MEL_PER_S or getattr(self._fe, "dither", 0.0):
            # short-form (or random dither: one call, as transformers)
            self._full = log_mel(model, np.asarray(audio, dtype=np.float32))
            self.shape = tuple(self._full.shape)
        else:
            self.shape = (1, n_mels, len(audio) // int(self._fe.hop_length))

    def _log_spec(self, first: int, end: int):
        """log10 of the mel power of frames [first, end) before the clip-wide clamp:
        float32 (n_mels, end - first)."""
        import torch

        fe, w = self._fe, self._audio
        n_fft, hop, n = int(fe.n_fft), int(fe.hop_length), len(self._audio)
        lo, hi = first * hop - n_fft // 2, (end - 1) * hop + n_fft // 2  # samples; torch.stft's centre padding
        if lo >= 0 and hi <= n:
            seg = w[lo:hi]
        else:  # a frame at the clip's start or end: reflect padding (no edge repeat), as torch.stft(center=True)
            idx = np.arange(lo, hi)
            idx = np.where(idx < 0, -idx, idx)
            idx = np.where(idx >= n, 2 * (n - 1) - idx, idx)
            seg = w[idx]
        seg = np.asarray(seg, dtype=np.float32)  # (a Pcm16Audio's slice is float32 already)
        stft = torch.stft(torch.from_numpy(np.ascontiguousarray(seg)), n_fft, hop,
                          window=torch.hann_window(n_fft), center=False, return_complex=True)
        magnitudes = (stft.abs() ** 2).contiguous()
        filters = torch.from_numpy(fe.mel_filters).to(torch.float32)
        return torch.clamp(filters.T @ magnitudes, min=1e-10).log10()

    def window(self, seek: int, n_frames: int):
        """float32 tensor (1, n_mels, <= n_frames): frames [seek, seek + n_frames) (fewer at
        the clip's end), normalised as the whole clip is."""
        if self._full is not None:
            return self._full[..., seek: seek + n_frames]
        import torch

        total = self.shape[-1]
        if self._max is None:
            self._max = max(float(self._log_spec(a, min(total, a + MEL_CHUNK)).max())
                            for a in range(0, total, MEL_CHUNK))
        end = min(total, seek + n_frames)
        spec = torch.maximum(self._log_spec(seek, end), torch.tensor(self._max - 8.0))
        return ((spec + 4.0) / 4.0)[None]


#: frames per chunk while finding a long clip's log-mel maximum: one window's (30 s). Chunks of
#: 30,000 frames (5 minutes) took a transient +220 MB at the start of a long run (STFT,
#: magnitudes, mel product; measured on 10 minutes), these +40 MB, in the same time
MEL_CHUNK = N_FRAMES


def log_mel(model, audio: np.ndarray):
    """float32 tensor (1, n_mels, n_frames): the log-mel spectrogram of the whole audio, as
    transformers' feature extractor computes it for long-form (``truncation=False,
    padding="longest"``: normalised over the whole clip); audio of 30 s or less is padded to
    30 s of samples first (short-form). In one call: :class:`LogMel` gives it a window at a
    time."""
    fe = model._loaded.feature_extractor
    if len(audio) <= N_FRAMES * SAMPLE_RATE // MEL_PER_S:
        return fe(audio, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
    out = fe(audio, sampling_rate=SAMPLE_RATE, return_tensors="pt", truncation=False, padding="longest",
             return_attention_mask=True)
    return out.input_features[..., : int(out.attention_mask.sum())]


def encode_window(model, mel, audio_key: str, seek: int, n_frames: int):
    """(EncoderOutput, cache hit) of the 30 s window of ``mel`` starting at mel frame ``seek``
    (zero-padded to 3000 frames, as transformers ``_get_input_segment``); cached."""
    import torch

    key = (model.name, audio_key, "mel", seek, n_frames)

    def run():
        model.encode_count += 1
        window = mel.window(seek, n_frames)
        if window.shape[-1] < N_FRAMES:
            window = torch.nn.functional.pad(window, (0, N_FRAMES - window.shape[-1]))
        return model.backend.encode({"input_features": window,
                                     "source_len": torch.tensor(math.ceil(n_frames / INPUT_STRIDE))})

    encoded, hit = model._cache.get_or_encode(key, run)
    return encoded, hit


@dataclass(frozen=True)
class WindowPlan:
    """Where one window of a long-form run sat, so the run can be forked, re-scored
    (what-if) or aligned later on the same encoder output and prompt.

    Attributes:
        seek: its first mel frame (10 ms); n_frames: the mel frames it covers (<= 3000).
        prompt: its DecoderPrompt (previous text included).
        event: its SegmentEvent.
    """

    seek: int
    n_frames: int
    prompt: object
    event: SegmentEvent


def window_samples(plan: WindowPlan) -> tuple[int, int]:
    """(first, end) sample of the audio a window covers (16 kHz)."""
    per = SAMPLE_RATE // MEL_PER_S
    return plan.seek * per, (plan.seek + plan.n_frames) * per


def encode_audio(model, audio: np.ndarray, plan: WindowPlan):
    """The EncoderOutput of ``plan``'s window of ``audio`` (another version of the run's
    audio, e.g. with a span silenced): the whole clip's log-mel, cut as the run cut it."""
    key = audio_key(audio)
    encoded = encode_window(model, LogMel(model, audio), key, plan.seek, plan.n_frames)[0]
    hold_window_kv(model, encoded)
    return encoded


def plan_of_run(model, audio: np.ndarray, options: DecodingOptions, language: str, task: str,
                candidate_languages=None):
    """(windows, prepare, stats) of the last long-form run on ``audio`` (as
    ``SpeechModel._plan`` gives for fixed windows): its :class:`WindowPlan` s and a
    ``prepare`` giving each window's cached encoder output, prompt and SegmentEvent, so
    ``fork_segment`` and ``core.tasks.whatif`` work on a long-form run.

    Raises:
        ValueError: this audio has not been transcribed long-form by this model.
    """
    from core.inputs.types import check_audio as _check_audio
    from core.tasks.plan import Prepared

    options.validate()
    model.check_language_task(language, task, candidate_languages)
    audio = _check_audio(audio)
    key = audio_key(audio)
    plans = getattr(model, "_longform_plans", {}).get(key)
    if not plans:
        raise ValueError("this audio has no long-form run to go back to; transcribe it long-form first")
    mel = LogMel(model, audio)  # computed only for a window not in the encoder cache

    def prepare(i: int, plan: WindowPlan) -> Prepared:
        encoded, hit = encode_window(model, mel, key, plan.seek, plan.n_frames)
        hold_window_kv(model, encoded)  # a fork on an old window: its K/V come back, the oldest held go
        return Prepared(encoded, plan.prompt, plan.event, hit)

    return list(plans), prepare, RunStats(load_s=model.load_s, audio_s=len(audio) / SAMPLE_RATE, encoder_cached=True)
