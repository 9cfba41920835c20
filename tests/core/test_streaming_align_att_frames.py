"""AlignAtt's most-attended frame as ufal/SimulStreaming finds it (issue 23, session 13):
the alignment heads' rows z-scored per head and frame over the decode's rows, median-filtered
over frames (width 7), averaged over the heads (``core.streaming.decoder.AttentionFrames``),
instead of the heads' plain mean."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from core.options import DecodingOptions
from core.streaming.decoder import AttentionFrames, WhisperDecoder, median_filter
from tests.core.test_alignment import ref_median_filter as whisper_median_filter  # openai/whisper timing.median_filter
from tests.helpers.speech import synth_speech

pytestmark = [pytest.mark.usefixtures("one_torch_thread")]


def simul_streaming_frame(rows: torch.Tensor, n_frames: int) -> int:
    """SimulStreaming's ``infer`` on the alignment heads' rows (heads, positions, frames) fed so
    far: z-score over the positions, median filter 7, mean over heads, the last row's argmax
    within the buffer's frames."""
    a = rows[None]  # (beam 1, heads, positions, frames)
    std, mean = torch.std_mean(a, dim=-2, keepdim=True, unbiased=False)
    a = whisper_median_filter((a - mean) / std, 7).mean(dim=1)[:, :, :n_frames]
    return int(torch.argmax(a[:, -1, :], dim=-1)[0])


def test_median_filter_is_whispers():
    x = np.random.default_rng(0).standard_normal((3, 40)).astype(np.float32)
    assert np.allclose(median_filter(x, 7), whisper_median_filter(torch.from_numpy(x), 7).numpy())


def test_the_frame_follows_what_the_token_attends_more_than_the_other_rows_do():
    """Every row of the decode attends frame 0 most (a sink); the new token attends frame 0
    a little less and frames 42-48 of 50 more than any row before it. The heads' plain mean
    points at frame 0 (far from the buffer's end: AlignAtt would emit the token); the normalised
    row points into 42-48, inside the last 10 frames (AlignAtt waits)."""
    rng = np.random.default_rng(1)
    heads, frames = 4, 50

    def row(peak=None):
        r = 0.01 + 0.002 * rng.random((heads, frames))
        r[:, 0] = 0.6
        if peak is not None:
            r[:, 0] = 0.5
            r[:, peak - 3: peak + 4] = 0.05  # attention is smooth over frames (the median filter's width)
        return r / r.sum(axis=1, keepdims=True)

    prompt = np.stack([row() for _ in range(6)], axis=1)  # (heads, 6 rows, frames)
    frames_of = AttentionFrames(prompt)
    for _ in range(3):  # three earlier tokens like the prompt
        frames_of.add(row())
    new = row(peak=45)
    assert int(np.argmax(new.mean(axis=0))) == 0
    assert 42 <= int(np.argmax(frames_of.add(new))) <= 48


def test_a_lone_row_gives_the_heads_mean():
    r = np.random.default_rng(2).random((3, 20))
    assert np.allclose(AttentionFrames(np.zeros((3, 0, 20))).add(r), r.mean(axis=0))


def test_an_unknown_frame_rule_says_which_exist(whisper_tiny_en):
    with pytest.raises(ValueError, match="normalised, mean"):
        WhisperDecoder(whisper_tiny_en, DecodingOptions(), frame_rule="median")


def test_the_decoders_frames_are_simul_streamings_over_the_prompt_and_the_tokens(whisper_tiny_en):
    """Each new token's frame (WhisperDecoder, frame_rule "normalised", running sums) equals
    SimulStreaming's computation over the rows of one decoder call that feeds the whole prompt
    (previous text, start sequence, forced committed tokens) and the tokens before it."""
    from core.streaming.short_encoder import encode

    m = whisper_tiny_en
    audio = synth_speech("The old lighthouse keeper climbed the stairs every evening.")[: int(2.6 * 16000)]
    previous = m.backend.tokenizer.encode(" Once upon a time.", add_special_tokens=False)
    dec = WhisperDecoder(m, DecodingOptions(), language="en", frame_rule="normalised")

    def never(token, n_frames):  # a stop rule that never stops: the rule applies with one
        return False

    first = dec.decode(audio, 0.0, stop=never)
    forced = [t.id for t in first.tokens[:2]]
    hyp = dec.decode(audio, 0.0, previous=previous, forced=forced, stop=never)
    assert len(hyp.tokens) >= 3

    encoded = encode(m, audio, "buffer")
    prompt = list(m.prompt("en", "transcribe", previous=previous).prompt_ids) + forced
    ids = prompt + [t.id for t in hyp.tokens]
    out = m.backend.step(torch.tensor([ids[:-1]]), m.backend.init_cache(encoded, 1), True, all_positions=True)
    n = int(encoded.source_len)
    att = out.position_cross_attention[0, :, :, :, :n].float()  # (positions, layers, heads, frames)
    rows = torch.stack([att[:, layer, head] for layer, head in m.alignment_heads])  # (heads, positions, frames)
    want = [simul_streaming_frame(rows[:, : len(prompt) + i], n) for i in range(len(hyp.tokens))]
    assert [t.frame for t in hyp.tokens] == want


def test_a_decode_without_a_stop_rule_skips_the_prompts_extra_pass(whisper_tiny_en, monkeypatch):
    """Only a stop rule (AlignAtt) reads the normalised frames: LocalAgreement's and
    fixed-window's decodes must not pay the prompt's extra decoder pass (22-28% of a decode)."""
    m = whisper_tiny_en
    audio = synth_speech("The old lighthouse keeper climbed the stairs.")[: int(2.0 * 16000)]
    dec = WhisperDecoder(m, DecodingOptions(), language="en", frame_rule="normalised")
    calls = []
    real = dec._prompt_rows
    monkeypatch.setattr(dec, "_prompt_rows", lambda *a: calls.append(1) or real(*a))
    dec.decode(audio, 0.0)
    assert calls == []
    dec.decode(audio, 0.0, stop=lambda token, n_frames: False)
    assert calls == [1]
