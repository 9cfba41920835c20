"""Whisper's timestamp rules: a hard rule of the model when it decodes with timestamps.

Equal to openai/whisper ``decoding.py`` ``ApplyTimestampRules`` and transformers
``WhisperTimeStampLogitsProcessor`` (tests/core/test_whisper_timestamps.py checks the
numbers). Token ids ``>= timestamp_begin`` are timestamps ``<|0.00|>``, ``<|0.02|>``, ...
(``(id - timestamp_begin) * 0.02`` s from the window's start).
"""

from __future__ import annotations

import torch

NEG_INF = float("-inf")


class TimestampRules:
    """Mask the scores so the decoder emits timestamps as Whisper does.

    - ``<|notimestamps|>`` is never chosen;
    - timestamps come in pairs (a lone timestamp is followed by another or by EOS; a
      pair is followed by text);
    - timestamps never decrease (after a pair the next one is strictly later);
    - the first free token is a timestamp, at most ``max_initial_timestamp_index``
      (50 = 1.0 s) ticks in;
    - when the timestamps' total probability beats every text token, text is masked
      (a timestamp is forced).

    Args:
        no_timestamps_token_id: id of ``<|notimestamps|>``; ``timestamp_begin`` is the next id.
        eos_token_id: the end-of-text id (ids below it are text).
        begin_index: ``input_ids`` length at the first free step (the forced prompt).
        max_initial_timestamp_index: the latest initial timestamp in 0.02 s ticks, or None.

    Raises:
        ValueError: negative ids or index.
    """

    name = "timestamp_rules"

    def __init__(self, no_timestamps_token_id: int, eos_token_id: int, begin_index: int,
                 max_initial_timestamp_index: int | None = 50):
        if min(no_timestamps_token_id, eos_token_id, begin_index) < 0:
            raise ValueError("timestamp rules need non-negative token ids and begin index")
        if max_initial_timestamp_index is not None and max_initial_timestamp_index < 0:
            raise ValueError(f"max_initial_timestamp_index must be >= 0, got {max_initial_timestamp_index}")
        self.no_timestamps_token_id = int(no_timestamps_token_id)
        self.timestamp_begin = self.no_timestamps_token_id + 1
        self.eos_token_id = int(eos_token_id)
        self.begin_index = int(begin_index)
        self.max_initial_timestamp_index = max_initial_timestamp_index

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        ts = self.timestamp_begin
        scores = scores.clone()
        scores[:, self.no_timestamps_token_id] = NEG_INF
        lowest = []  # per row: the first timestamp id still allowed
        for k, seq in enumerate(input_ids.tolist()):
            seq = seq[self.begin_index:]
            last_ts = len(seq) >= 1 and seq[-1] >= ts
            penultimate_ts = len(seq) < 2 or seq[-2] >= ts
            if last_ts:
                if penultimate_ts:  # a pair just closed: text next
                    scores[k, ts:] = NEG_INF
                else:  # a lone timestamp: another one (or EOS) next
                    scores[k, : self.eos_token_id] = NEG_INF
            stamps = [t for t in seq if t >= ts]
            if not stamps:
                lowest.append(ts)
            elif last_ts and not penultimate_ts:
                lowest.append(stamps[-1])  # the closing timestamp may equal the opening one
            else:
                lowest.append(stamps[-1] + 1)  # never repeat or go back
        vocab = torch.arange(scores.shape[-1], device=scores.device)
        below = torch.tensor(lowest, device=scores.device).unsqueeze(-1)
        scores.masked_fill_((vocab >= ts) & (vocab < below), NEG_INF)
        if input_ids.shape[1] == self.begin_index:  # the first token is a timestamp, <= 1.0 s
            scores[:, :ts] = NEG_INF
            if self.max_initial_timestamp_index is not None:
                scores[:, ts + self.max_initial_timestamp_index + 1:] = NEG_INF
        # a timestamp is forced when their total probability beats every text token
        logprobs = torch.log_softmax(scores.float(), dim=-1)
        timestamp_logprob = logprobs[:, ts:].logsumexp(dim=-1)
        max_text_logprob = logprobs[:, :ts].max(dim=-1).values
        force = (timestamp_logprob > max_text_logprob).unsqueeze(-1)
        scores[:, :ts] = scores[:, :ts].masked_fill(force, NEG_INF)
        return scores


def timestamp_seconds(token_id: int, timestamp_begin: int, tick_s: float = 0.02) -> float:
    """Seconds from the window's start that timestamp token ``token_id`` stands for."""
    return (token_id - timestamp_begin) * tick_s


def timestamp_segments(windows, timestamp_begin: int, decode, window_s: float = 30.0,
                       tick_s: float = 0.02) -> list[dict]:
    """Segments ``{"start", "end", "text"}`` (seconds) from timestamp-token pairs.

    Args:
        windows: per 30 s window, ``(window index, generated token ids)`` (EOS may be last).
        timestamp_begin: id of ``<|0.00|>``.
        decode: token ids -> text.
        window_s: the window length; window ``i`` starts at ``i * window_s``.

    A window cut off inside a segment (no closing timestamp) ends it at the window's end.
    """
    out: list[dict] = []
    for index, ids in windows:
        offset = index * window_s
        start, text_ids = None, []
        for t in ids:
            if t >= timestamp_begin:
                seconds = offset + timestamp_seconds(t, timestamp_begin, tick_s)
                if start is None:
                    start, text_ids = seconds, []
                else:
                    out.append({"start": round(start, 2), "end": round(seconds, 2),
                                "text": decode(text_ids).strip()})
                    start = None
            elif start is not None:
                text_ids.append(t)
        if start is not None and decode(text_ids).strip():
            out.append({"start": round(start, 2), "end": round(offset + window_s, 2), "text": decode(text_ids).strip()})
    return out
