"""Encoding a streaming buffer: the padded 30 s window (as offline) or only the buffer's frames
(whisper.cpp's ``audio_ctx``).

Whisper's encoder was trained on 30 s windows: every input is padded to 3000 mel frames and the
encoder always runs over 1500 positions, however short the audio. A streaming decoder re-encodes
its buffer (1-15 s) every step, so most of that work is padding. whisper.cpp's ``audio_ctx``
(``whisper_full_params.audio_ctx``, ``--audio-ctx`` in ``examples/stream``) runs the encoder over
the first ``audio_ctx`` positions only, with the positional embedding sliced to them: the cost
falls with the buffer (tiny.en on one thread: 0.45 s for the window, 0.04 s for 2 s of audio,
0.12 s for 10 s).

The price: the model never saw a window that ends right after the speech. On tiny.en, encoding
exactly the buffer's frames makes the decoder loop ("the old light housekeeper climbed, the old
light housekeeper climbed, ...", on 7 of 14 cuts of espeak speech), the failure whisper.cpp's
issue tracker reports for small ``audio_ctx``; SimulStreaming pads every buffer to 30 s for this
reason. A little silence after the buffer (``pad_s``, 1-3 s) gives the model the end it knows:
on the same 14 cuts, 1 s of padding looped once (a 2 s cut), 3 s never
(``/work/notes/h23core/exp4.py``). :class:`core.streaming.decoder.WhisperDecoder` therefore pads
and falls back to the full window when a decode still loops (compression ratio).

Nothing is cached: a stream's buffers are each decoded once or twice, and keeping them would push
the user's own inputs out of the model's encoder cache.
"""

from __future__ import annotations

import math

import numpy as np

from core.catalog import SAMPLE_RATE

#: the encoder spans a WhisperDecoder offers: the padded 30 s window, or the buffer (+ pad_s)
ENCODERS = ("window", "buffer")
#: seconds of silence encoded after the buffer in "buffer" mode (see the module docstring)
PAD_S = 3.0
#: encoder frames per second (20 ms each) and mel frames per encoder frame
_FRAMES_PER_S, _MEL_PER_FRAME, _WINDOW_FRAMES = 50, 2, 1500


def buffer_frames(n_samples: int) -> int:
    """Encoder frames (20 ms) covering ``n_samples`` samples at 16 kHz (at most 1500)."""
    return min(_WINDOW_FRAMES, math.ceil(n_samples / (SAMPLE_RATE / _FRAMES_PER_S)))


def encode(model, audio: np.ndarray, span: str = "window", pad_s: float = PAD_S):
    """Encode ``audio`` (float32 (n,), 16 kHz, <= 30 s) with ``model`` (a ``SpeechModel``),
    outside its encoder cache.

    Args:
        span: "window": the 30 s padded window, as offline (1500 frames); "buffer": only the
            buffer's frames plus ``pad_s`` seconds of the padding (whisper.cpp ``audio_ctx``),
            the positional embedding sliced to them.
        pad_s: seconds of padding (silence) encoded after the buffer in "buffer" mode (>= 0).

    Returns:
        ``core.backends.base.EncoderOutput``: hidden states float32 (1, frames, d_model) with
        ``source_len`` = the buffer's frames (the padding is not counted).

    Raises:
        ValueError: an unknown ``span`` or a negative ``pad_s``.
    """
    import torch

    if span not in ENCODERS:
        raise ValueError(f"unknown encoder span {span!r}; use one of {', '.join(ENCODERS)}")
    if pad_s < 0:
        raise ValueError(f"pad_s must be >= 0 seconds, got {pad_s}")
    n = buffer_frames(len(audio))
    features = model._features(audio)  # (1, n_mels, 3000): the window's log-mel, padded as offline
    if span == "window":
        return model.backend.encode({"input_features": features, "source_len": torch.tensor(n)})
    from core.backends.base import EncoderOutput

    frames = min(_WINDOW_FRAMES, n + int(round(pad_s * _FRAMES_PER_S)))
    return EncoderOutput(hidden_states=short_encoder_pass(model.backend.model, features[..., :_MEL_PER_FRAME * frames]),
                         source_len=n, extras={"attention_mask": None})


def short_encoder_pass(whisper, features):
    """transformers' ``WhisperEncoder.forward`` over fewer than 3000 mel frames: conv1, conv2
    (GELU), the positional embedding's first ``frames`` rows, the layers, the final norm
    (``whisper.model.encoder.conv1/conv2/embed_positions/layers/layer_norm``). transformers
    refuses inputs of another length; whisper.cpp's ``audio_ctx`` does the same slicing.

    Args:
        whisper: a ``WhisperForConditionalGeneration``.
        features: float32 (1, n_mels, 2 * frames) log-mel, frames <= 1500.

    Returns:
        float32 tensor (1, frames, d_model).
    """
    import torch
    from torch.nn import functional as F

    enc = whisper.model.encoder
    with torch.inference_mode():
        x = features.to(enc.conv1.weight.dtype)
        x = F.gelu(enc.conv2(F.gelu(enc.conv1(x)))).permute(0, 2, 1)
        x = x + enc.embed_positions.weight[: x.shape[1]]
        for layer in enc.layers:
            x = layer(x, None)
            if isinstance(x, tuple):  # older transformers return (hidden_states, attentions)
                x = x[0]
        return enc.layer_norm(x).float()
