"""The interface every model backend implements.

A backend wraps one encoder-decoder model. The engine sees only this interface:
``encode`` once per input, then ``step`` the decoder with an opaque cache.
Only modules under ``core/backends`` import model classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

if TYPE_CHECKING:  # annotations only: the tasks import this module without loading torch
    import torch


@dataclass
class EncoderOutput:
    """Encoder result for one input, reused by every re-decode.

    Attributes:
        hidden_states: float32 tensor (1, source_len_total, d_model): encoder hidden states.
        source_len: number of leading positions that hold real input (e.g. the encoder
            frames covering audio; Whisper pads to 1500 frames of 20 ms). Attention
            reported to the user is cut to this length.
        extras: backend-specific data (masks, source ids, ...).
    """

    hidden_states: torch.Tensor
    source_len: int
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DecoderPrompt:
    """What the decoder is fed before its first free choice, and the hard rules.

    Attributes:
        prompt_ids: forced decoder prefix (e.g. Whisper's <|startoftranscript|><|en|>
            <|transcribe|><|notimestamps|>; Marian's pad/start id). Never empty (the
            engine raises ValueError): a model whose first step takes no token (Bergamot
            tiny11) uses a virtual start id that its backend maps to that first step.
        eos_token_id: generation ends when this is chosen.
        suppress_tokens: ids whose logits are set to -inf at every step.
        begin_suppress_tokens: ids set to -inf at the first free step only.
        max_new_tokens: model limit on generated tokens (min'ed with the options').
        timestamp_rules: Whisper decoding with timestamps: (``<|notimestamps|>`` id,
            max initial timestamp index or None) for ``core.processors.whisper.TimestampRules``
            (a hard rule); None when off.
    """

    prompt_ids: tuple[int, ...]
    eos_token_id: int
    suppress_tokens: tuple[int, ...] = ()
    begin_suppress_tokens: tuple[int, ...] = ()
    max_new_tokens: int | None = None
    timestamp_rules: tuple[int, int | None] | None = None


@dataclass
class StepOutput:
    """Result of one decoder step.

    Attributes:
        logits: float32 tensor (batch, vocab_size): next-token logits after the last
            input position.
        cross_attention: float32 tensor (batch, layers, heads, source_len_total) for the
            last input position, or None when not requested.
        cache: the updated opaque cache to pass to the next ``step``.
        hidden_states: float32 tensor (batch, new_len, d_model): the decoder's last
            layer output (after its final layer norm) for every position fed in this
            step, or None if the backend does not give it (contrastive search needs it).
        lens_logits: the logit lens (nostalgebraist 2020) of the last input position,
            float32 (batch, n_decoder_layers, vocab_size): row ``i`` is the model's final
            layer norm and output projection applied to decoder layer ``i``'s output (the
            residual stream after that layer), the last row is ``logits`` itself (the
            same tensor values: the output layer). None unless ``step`` was called with
            ``capture_lens=True``.
        position_logits: float32 (batch, new_len, vocab_size): the next-token logits after
            EVERY position fed in this step (row ``j`` = the logits after the ``j``-th fed
            position; the last row equals ``logits``, the same tensor values), for
            speculative decoding's verify call (the target scores a whole draft at once).
            None unless ``step`` was called with ``all_positions=True``. Bergamot's fresh
            cache counts its implicit start position (``new_len`` as in ``hidden_states``).
        position_cross_attention: float32 (batch, new_len, layers, heads, source_len_total):
            the cross-attention of every fed position (the last row equals
            ``cross_attention``); only with ``all_positions=True`` and ``output_attentions``.
        logit_ids: None (``logits`` covers the whole vocabulary), or int64 (n,), ascending: the
            vocabulary ids of ``logits``' columns, every id not listed having logit -inf (a
            compact row: ``logits`` is then (batch, n)). Only a backend with ``compact_logits``
            gives one, and only when ``step`` was called with ``compact=True``; the ids are
            whole aligned blocks of ``COMPACT_BLOCK`` consecutive ids (see there).
    """

    logits: torch.Tensor
    cross_attention: torch.Tensor | None
    cache: Any
    hidden_states: torch.Tensor | None = None
    lens_logits: torch.Tensor | None = None
    position_logits: torch.Tensor | None = None
    position_cross_attention: torch.Tensor | None = None
    logit_ids: torch.Tensor | None = None


COMPACT_BLOCK = 16
"""A compact logits row (``StepOutput.logit_ids``) holds whole blocks of this many consecutive
ids, each starting at a multiple of it: a lexical shortlist's ~500 ids of 32,000 become ~350
blocks (~5,600 columns). Summed over such a row, a softmax adds each entry in the same SIMD lane
(position modulo the vector width, 16 floats at most) and in the same order as over the whole
row, where the missing blocks would only add zeros: the same bits (``core.scoring`` checks this
once per process and vocabulary size before asking a backend for compact rows)."""


class Backend(Protocol):
    """A seq2seq model the engine can drive.

    Attributes:
        name: short display name ("whisper-base", "bergamot en-pt", ...).
        vocab_size: size of the logits' last dimension.
    """

    name: str
    vocab_size: int

    def encode(self, model_inputs: Mapping[str, torch.Tensor]) -> EncoderOutput:
        """Run the encoder once on what the task prepared, by name: ``input_features``
        (log-mel features), ``pixel_values`` or ``input_ids`` (source ids), batch 1."""
        ...

    def init_cache(self, encoded: EncoderOutput, batch_size: int) -> Any:
        """An empty decoder cache for ``batch_size`` hypotheses over ``encoded``
        (cross-attention keys/values may be computed here once)."""
        ...

    def step(self, input_ids: torch.Tensor, cache: Any, output_attentions: bool) -> StepOutput:
        """Feed ``input_ids`` (int64, (batch, new_len)): the tokens the cache has not
        seen yet (the whole prompt first, then one token per step).

        A backend that can give the logit lens also takes ``capture_lens: bool = False``
        (keyword) and then fills ``StepOutput.lens_logits``; the engine passes it only
        when ``DecodingOptions.capture_lens`` is on, so a step without it costs nothing
        more (all bundled backends: ``hf``, ``marian_tiny``, ``ocr_backend``).

        Several new tokens may be fed to a non-empty cache (a causal mask with the cache's
        offset): the result equals feeding them one step at a time, up to float summation
        order. Keywords of the bundled backends (speculative decoding, issue 21):

        * ``all_positions: bool = False``: also fill ``StepOutput.position_logits`` (the
          logits after every fed position);
        * ``exit_layer: int | None = None``: early exit (LayerSkip, Elhoushi et al. 2024):
          only decoder layers ``< exit_layer`` run, then the final norm and the output head
          (what the logit lens computes for that layer). Use a cache of its own (from
          ``init_cache``) for early-exit steps: the layers above ``exit_layer`` are not
          filled. ``ValueError`` outside ``[1, decoder layers]``;
        * ``head_ids: torch.Tensor | None = None``: int64 (k,) a shortlist of output ids:
          only their logits are computed, scattered into a row of ``-inf`` of full vocabulary
          width (so ``logits``/``position_logits`` keep shape (..., vocab_size)).

        ``lens_logits`` is not available together with ``exit_layer``/``head_ids``.

        A backend with a class attribute ``compact_logits = True`` also takes ``compact: bool =
        False``: with it, where the step's logits are -inf outside a shortlist, it may give them
        as a compact row (``StepOutput.logit_ids``) instead of a full-vocabulary one; the engine
        asks for it only where every consumer of the step reads compact rows."""
        ...

    def reorder_cache(self, cache: Any, beam_idx: torch.Tensor) -> Any:
        """Select/reorder hypotheses: ``beam_idx`` int64 (new_batch,) indexes the old batch."""
        ...

    def token_text(self, token_id: int) -> str:
        """Display text of a single token (special tokens shown as-is)."""
        ...

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of a token sequence, special tokens skipped."""
        ...

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` as the decoder would write it, no special tokens (for
        bad words and logit bias). ``" cat"`` and ``"cat"`` may differ."""
        ...


class TruncatableCache(Protocol):
    """An optional part of ``Backend``: a backend with this method lets the engine reuse
    the KV cache of a previous run on the same input (a fork continues from the common
    prefix instead of re-running it; ``core.engine.Engine.run``'s ``reuse_cache``). The
    engine looks it up with ``getattr(backend, "truncate_cache", None)``."""

    def truncate_cache(self, cache: Any, length: int) -> Any:
        """The cache holding only the first ``length`` decoder positions of ``cache`` (a
        batch-1 cache from ``step``; the result may be ``cache`` changed in place, and
        ``cache`` must not be used afterwards), ready for ``step`` to feed position
        ``length`` on.

        Raises:
            ValueError: ``length`` outside ``[0, positions held]``, or a cache that cannot
                be truncated (e.g. reordered).
        """
        ...


def main_input(model_inputs: Mapping[str, Any] | Any, key: str) -> Any:
    """``model_inputs[key]``: the one input of a backend that takes a single tensor.

    The tasks always pass a mapping. The hand-written backends (Bergamot, the bundled OCR
    reader) also take that tensor (or id list) bare, as their own tests and benchmarks
    feed it.

    Raises:
        ValueError: a mapping without ``key``.
    """
    if not isinstance(model_inputs, Mapping):
        return model_inputs
    if key not in model_inputs:
        raise ValueError(f"model_inputs needs {key!r}; got keys {sorted(model_inputs)}")
    return model_inputs[key]
