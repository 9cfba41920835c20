"""Live transcription: streaming policies that decide, with part of an utterance heard, which
tokens are final (committed) and which may still change (tentative). Qt-free.

- ``local_agreement.LocalAgreement`` (``local-agreement:n``): ufal/whisper_streaming.
- ``align_att.AlignAtt`` (``align-att:f``): ufal/SimulStreaming's AlignAtt.
- ``fixed_window.FixedWindow`` (``fixed-window[:length]``): whisper.cpp's ``stream``.
- ``driver.StreamDriver``: audio chunks in, events (``events``) out; ``driver.play`` plays a file
  as a microphone; ``decoder.WhisperDecoder`` decodes a buffer with a loaded SpeechModel.
"""

from core.streaming.align_att import AlignAtt
from core.streaming.base import BufferView, Decoder, Hypothesis, Policy, Update
from core.streaming.driver import StreamDriver, play, stream
from core.streaming.events import (Committed, FellBehind, StreamEvent, StreamFinished, StreamToken, Tentative,
                                   Trimmed, Waited)
from core.streaming.fixed_window import FixedWindow
from core.streaming.local_agreement import LocalAgreement
from core.streaming.policies import POLICIES, parse_policy

__all__ = ["AlignAtt", "BufferView", "Committed", "Decoder", "FellBehind", "FixedWindow", "Hypothesis",
           "LocalAgreement", "POLICIES", "Policy", "StreamDriver", "StreamEvent", "StreamFinished", "StreamToken", "Tentative",
           "Trimmed", "Update", "Waited", "parse_policy", "play", "stream"]
