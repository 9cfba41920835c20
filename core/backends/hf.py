"""Backend for any transformers encoder-decoder model.

``HFSeq2SeqBackend`` drives WhisperForConditionalGeneration (and the bundled Whisper models'
``core.backends.whisper_net.WhisperNet``, which has its module tree and forward), MarianMTModel,
T5ForConditionalGeneration, M2M100ForConditionalGeneration and
VisionEncoderDecoderModel (e.g. TrOCR): the encoder runs once per input, the decoder
is stepped with a KV cache (self-attention keys/values grow by one position per
step; cross-attention keys/values are computed once from the encoder hidden states).

Two decoder paths:

* generic: the model's own forward with ``encoder_outputs=`` and a transformers
  ``EncoderDecoderCache`` (what ``generate()`` does, minus its per-step bookkeeping);
* Whisper "lean" step (``core.backends.whisper_lean.WhisperLeanDecoder``): the same module weights, run layer by
  layer with preallocated self-attention KV tensors and precomputed cross-attention
  keys/values. Used for Whisper because the per-step overhead of the generic forward
  (mask building, cache objects, output recording) is a large part of a tiny model's
  step time. ``tests/core/test_hf_backend.py`` checks that both paths give the same
  logits and cross-attention.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch

from core.backends.base import EncoderOutput, StepOutput
from core.backends.int8 import check_dtype
from core.backends.whisper_lean import WhisperLeanDecoder
from core.dtypes import HALF_DTYPES

_INPUT_KEYS = ("input_features", "input_ids", "pixel_values")


def _on_host(out: StepOutput) -> StepOutput:
    """``out`` with its tensors (all but the cache) copied to the CPU."""
    import dataclasses

    moved = {f.name: getattr(out, f.name).cpu() for f in dataclasses.fields(out)
             if f.name != "cache" and torch.is_tensor(getattr(out, f.name))}
    return dataclasses.replace(out, **moved)


def _is_whisper(model: Any) -> bool:
    """transformers' Whisper (hub checkpoints) or the app's own (``core.backends.whisper_net``, bundled)."""
    return type(model).__name__ in ("WhisperForConditionalGeneration", "WhisperNet")


@dataclass
class HFCache:
    """Decoder state for the generic path.

    Attributes:
        kv: transformers ``EncoderDecoderCache`` (self- and cross-attention keys/values).
        encoder_hidden_states: float32 (batch, source_len_total, d_model).
        encoder_attention_mask: int64 (batch, source_len_total) or None (no padding).
    """

    kv: Any
    encoder_hidden_states: torch.Tensor
    encoder_attention_mask: torch.Tensor | None


class LensHead:
    """The logit lens of a transformers seq2seq model's decoder (nostalgebraist 2020):
    what its output head makes of an inner decoder layer's residual stream.

    ``lens(h) = head(final_norm(h))`` where ``final_norm`` is the decoder stack's last
    norm (Whisper, M2M100, mBART ``layer_norm``; T5 ``final_layer_norm``; none for
    post-norm decoders: Marian, BART, TrOCR) and ``head`` what the model does after the
    decoder (T5's ``d_model ** -0.5`` scaling when it scales its decoder outputs, the
    output embeddings, Marian/BART's ``final_logits_bias``).

    Args:
        model: the transformers encoder-decoder model.

    Raises:
        RuntimeError (on the first call): the head does not give the model's own logits
            from the last hidden state (a model this class does not know).
    """

    def __init__(self, model: Any):
        dec = model.get_decoder()
        inner = getattr(getattr(dec, "model", None), "decoder", None)  # TrOCRForCausalLM wraps its stack
        dec = inner if inner is not None else dec
        self.norm = next((m for name in ("layer_norm", "final_layer_norm", "norm")
                          if isinstance(m := getattr(dec, name, None), torch.nn.Module)), None)
        self.out = model.get_output_embeddings()
        bias = getattr(model, "final_logits_bias", None)
        self.bias = bias if torch.is_tensor(bias) else None
        self.scale = None
        if hasattr(model, "model_dim"):  # T5: scale_decoder_outputs (transformers 5), tie_word_embeddings (4)
            cfg = model.config
            if getattr(cfg, "scale_decoder_outputs", getattr(cfg, "tie_word_embeddings", False)):
                self.scale = model.model_dim ** -0.5
        self.name = type(model).__name__
        self.checked = False

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """The model's logits from decoder output ``h`` (..., d_model) (after the final norm)."""
        if self.scale is not None:
            h = h * self.scale
        logits = self.out(h)
        return logits + self.bias if self.bias is not None else logits

    def __call__(self, hidden_states: Sequence[torch.Tensor], logits: torch.Tensor) -> torch.Tensor:
        """float32 (batch, layers, vocab) from transformers' ``decoder_hidden_states``
        (embeddings, then each layer's output, the last one after the final norm; each
        (batch, new_len, d_model)) and the model's last-position ``logits`` (batch, vocab)."""
        if not self.checked:  # once: the head must reproduce the model's own logits
            own = self.head(hidden_states[-1][:, -1]).float()
            if not torch.allclose(own, logits.float(), rtol=1e-4, atol=1e-4):
                raise RuntimeError(f"the logit lens does not know how {self.name} computes its logits")
            self.checked = True
        inner = [h[:, -1] for h in hidden_states[1:-1]]
        if not inner:
            return logits.float()[:, None]
        h = torch.stack(inner, dim=1)
        if self.norm is not None:
            h = self.norm(h)
        return torch.cat([self.head(h).float(), logits.float()[:, None]], dim=1)


def _shortlisted(logits: torch.Tensor, head_ids: torch.Tensor | None) -> torch.Tensor:
    """``logits`` (..., vocab) with every id outside ``head_ids`` (int64 (k,)) set to -inf
    (unchanged when ``head_ids`` is None)."""
    if head_ids is None:
        return logits
    out = torch.full_like(logits, float("-inf"))
    out[..., head_ids] = logits[..., head_ids]
    return out


class HFSeq2SeqBackend:
    """``core.backends.base.Backend`` for a transformers encoder-decoder model.

    Args:
        model: a transformers seq2seq model (``WhisperForConditionalGeneration``,
            ``MarianMTModel``, ``T5ForConditionalGeneration``,
            ``M2M100ForConditionalGeneration``, ``VisionEncoderDecoderModel``, ...).
            Put in eval mode; for the generic path its attention implementation is
            switched to "eager" so that cross-attention weights can be returned.
        tokenizer: its tokenizer (``convert_ids_to_tokens``/``decode``), or a processor
            with a ``tokenizer`` attribute.
        name: display name.
        lean: use ``WhisperLeanDecoder`` for Whisper models (default True).
        dtype: "float32" (default) or "int8": the model's linear layers were replaced by
            ``core.backends.int8.Int8Linear`` (``core.backends.whisper_models.load_whisper(...,
            dtype="int8")``) and the lean decoder's output projection is int8 too.

    Attributes:
        dtype: the compute type the model runs in ("float32" or "int8").

    Raises:
        ValueError: if ``model`` is not an encoder-decoder model, or ``dtype`` is "int8" for
            a model other than Whisper on the lean path (int8 is for Whisper only).
    """

    def __init__(self, model: Any, tokenizer: Any, name: str, *, lean: bool = True, dtype: str = "float32"):
        if not getattr(model.config, "is_encoder_decoder", False) and not hasattr(model, "get_encoder"):
            raise ValueError(f"{type(model).__name__} is not an encoder-decoder model")
        weights = next(model.parameters()).dtype
        # float16 / bfloat16: the model's weights were cast (core.backends.whisper_models.to_half)
        self.dtype = dtype if dtype in HALF_DTYPES and weights == getattr(torch, dtype) else check_dtype(dtype)
        #: where the weights are: inputs go there; on another device than the CPU each step's outputs come back
        self.device = next(model.parameters()).device
        if dtype == "int8" and not (lean and _is_whisper(model)):
            raise ValueError(f"int8 is available for Whisper models only (on the lean decoder), "
                             f"not {type(model).__name__}; use dtype float32")
        self.model = model.eval()
        self.tokenizer = getattr(tokenizer, "tokenizer", tokenizer)
        self.name = name
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self._lean = WhisperLeanDecoder(model, int8=dtype == "int8") if (lean and _is_whisper(model)) else None
        if self._lean is None and hasattr(model, "set_attn_implementation"):
            try:
                model.set_attn_implementation("eager")
            except Exception:  # older transformers / models without the switch: attentions may be None
                pass
        self._token_text: dict[int, str] = {}
        self._lens_head: LensHead | None = None  # built on the first step that captures the lens

    # -- encoder -------------------------------------------------------------------
    def encode(self, model_inputs: Mapping[str, torch.Tensor]) -> EncoderOutput:
        """Run the encoder once.

        Args:
            model_inputs: a mapping with one of ``input_features`` (float32 (1, n_mels,
                frames), Whisper), ``input_ids`` (int64 (1, src_len), text models; with an
                optional ``attention_mask`` (1, src_len)) or ``pixel_values`` (float32
                (1, 3, H, W), image models). An optional ``source_len`` (an int or a 0-d
                int64 tensor) overrides the
                number of real (non-padding) encoder positions, e.g. the encoder frames
                that cover the audio (Whisper pads every input to 1500 frames).

        Returns:
            EncoderOutput with hidden states float32 (1, src_total, d_model); ``source_len``
            = non-pad source tokens for text, ``source_len`` if given, else src_total.
            ``extras["attention_mask"]`` holds the text padding mask (or None),
            ``extras["source_ids"]`` the text source ids (int64 (1, src_len)).

        Raises:
            ValueError: if no known input key is present or the batch is not 1.
        """
        inputs = dict(model_inputs)
        source_len = inputs.pop("source_len", None)
        keys = [k for k in _INPUT_KEYS if k in inputs]
        if not keys:
            raise ValueError(
                f"model_inputs needs one of {', '.join(_INPUT_KEYS)}; got keys {sorted(inputs)}"
            )
        main = inputs[keys[0]]
        if not torch.is_tensor(main) or main.shape[0] != 1:
            raise ValueError(f"{keys[0]} must be a tensor with batch size 1, got {getattr(main, 'shape', type(main))}")
        mask = inputs.get("attention_mask")
        weights = next(self.model.parameters())
        for key in keys[:1]:  # audio / pixels in the weights' type and on their device (half precision, GPU)
            if main.is_floating_point() and (main.dtype != weights.dtype or main.device != weights.device):
                inputs[key] = main.to(device=weights.device, dtype=weights.dtype)
        with torch.inference_mode():
            out = self.model.get_encoder()(**inputs, return_dict=True)
        hidden = out.last_hidden_state.float()
        if source_len is None:
            source_len = int(mask.sum()) if mask is not None else hidden.shape[1]
        if mask is not None and bool(mask.all()):
            mask = None  # no padding: skip masking work in every step
        extras = {"attention_mask": mask}
        if keys[0] == "input_ids":  # text source: the encoder stages of the sampler chain need its ids
            extras["source_ids"] = main
        return EncoderOutput(hidden_states=hidden, source_len=int(source_len), extras=extras)

    # -- decoder -------------------------------------------------------------------
    def init_cache(self, encoded: EncoderOutput, batch_size: int) -> Any:
        """An empty decoder cache for ``batch_size`` hypotheses over ``encoded``."""
        hidden = encoded.hidden_states.to(self.model.dtype)
        with torch.inference_mode():
            if self._lean is not None:
                # cross-attention K/V depend on the encoder output only: computed on the
                # first decode of an input, reused by every re-decode of it
                kv = encoded.extras.get("whisper_cross_kv")
                if kv is None:
                    kv = encoded.extras["whisper_cross_kv"] = self._lean.cross_kv(hidden)
                return self._lean.init_cache(hidden, batch_size, kv)
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache

        mask = encoded.extras.get("attention_mask")
        return HFCache(
            kv=EncoderDecoderCache(DynamicCache(), DynamicCache()),
            encoder_hidden_states=hidden.expand(batch_size, -1, -1),
            encoder_attention_mask=None if mask is None else mask.expand(batch_size, -1),
        )

    def step(self, input_ids: torch.Tensor, cache: Any, output_attentions: bool,
             capture_lens: bool = False, *, all_positions: bool = False, exit_layer: int | None = None,
             head_ids: torch.Tensor | None = None) -> StepOutput:
        """Feed ``input_ids`` (int64 (batch, new_len)): the prompt first, then one token per
        step, or several tokens at once on a non-empty cache (a draft to verify; each
        position attends to the cache and to the fed positions up to itself).

        Returns logits float32 (batch, vocab) of the last position, cross-attention
        float32 (batch, layers, heads, src_total) if ``output_attentions``, and
        ``hidden_states`` float32 (batch, new_len, d_model): transformers'
        ``decoder_hidden_states[-1]``, the decoder's last layer output after its final
        layer norm (T5 scales it by d_model ** -0.5 before its tied lm_head; this is the
        unscaled tensor, as transformers' contrastive search uses it).

        With ``capture_lens``, ``lens_logits`` float32 (batch, decoder layers, vocab): the
        logit lens of the last position (``LensHead``: the decoder's final norm and the
        model's output head applied to ``decoder_hidden_states[i]``, i = 1 .. layers - 1;
        the last row is ``logits``).

        With ``all_positions``, ``position_logits`` float32 (batch, new_len, vocab): the
        logits after every fed position (the last row is ``logits``), and with
        ``output_attentions`` ``position_cross_attention`` float32 (batch, new_len, layers,
        heads, src_total). ``exit_layer`` and
        ``head_ids``: see ``core.backends.base.Backend.step`` (early exit and a shortlist
        head); the generic path takes ``exit_layer`` for decoders that keep their layers in
        a ``layers`` list (Whisper, Marian, BART, M2M100, mBART), and computes the full head
        before masking it to ``head_ids`` (correct, not cheaper).

        Raises:
            ValueError: ``exit_layer`` outside ``[1, decoder layers]`` or on a decoder this
                backend cannot cut; ``capture_lens`` with ``exit_layer``/``head_ids``.
        """
        if self.device.type != "cpu" and input_ids.device != self.device:  # a GPU: in there, outputs back
            out = self.step(input_ids.to(self.device), cache, output_attentions, capture_lens,
                            all_positions=all_positions, exit_layer=exit_layer,
                            head_ids=None if head_ids is None else head_ids.to(self.device))
            return _on_host(out)
        with torch.inference_mode():
            if self._lean is not None:
                return self._lean.step(input_ids, cache, output_attentions, capture_lens,
                                       all_positions=all_positions, exit_layer=exit_layer, head_ids=head_ids)
            from transformers.modeling_outputs import BaseModelOutput

            if capture_lens and (exit_layer is not None or head_ids is not None):
                raise ValueError("capture_lens cannot be combined with exit_layer or head_ids")
            model = self.model if exit_layer is None else self._early_exit_model(exit_layer)
            out = model(
                encoder_outputs=BaseModelOutput(last_hidden_state=cache.encoder_hidden_states),
                attention_mask=cache.encoder_attention_mask,
                decoder_input_ids=input_ids,
                past_key_values=cache.kv,
                use_cache=True,
                output_attentions=output_attentions,
                output_hidden_states=True,  # the last layer's output is kept for contrastive search
                return_dict=True,
            )
            positions = None
            if all_positions:
                positions = _shortlisted(out.logits.float(), head_ids)
                logits = positions[:, -1]
            else:
                logits = _shortlisted(out.logits[:, -1].float(), head_ids)
            hidden = out.decoder_hidden_states[-1].float()
            cross = cross_all = None
            if output_attentions:
                if not out.cross_attentions or out.cross_attentions[0] is None:
                    raise RuntimeError(
                        f"{type(self.model).__name__} returned no cross-attention; "
                        "it needs the 'eager' attention implementation"
                    )
                cross = torch.stack([a[:, :, -1] for a in out.cross_attentions], dim=1).float()
                if all_positions:  # (batch, new_len, layers, heads, src)
                    cross_all = torch.stack(list(out.cross_attentions), dim=1).permute(0, 3, 1, 2, 4).float()
            cache.kv = out.past_key_values
            lens = None
            if capture_lens:
                if self._lens_head is None:
                    self._lens_head = LensHead(self.model)
                lens = self._lens_head(out.decoder_hidden_states, out.logits[:, -1])
        return StepOutput(logits=logits, cross_attention=cross, cache=cache, hidden_states=hidden, lens_logits=lens,
                          position_logits=positions, position_cross_attention=cross_all)

    def _early_exit_model(self, exit_layer: int) -> Any:
        """A shallow copy of the model whose decoder holds only its first ``exit_layer``
        layers (the same weights, no copy), kept per ``exit_layer``.

        Raises:
            ValueError: a decoder without a ``layers`` list, or ``exit_layer`` outside it.
        """
        import copy

        kept = self.__dict__.setdefault("_exit_models", {})
        if exit_layer in kept:
            return kept[exit_layer]
        dec = self.model.get_decoder()
        layers = getattr(dec, "layers", None)
        inner = getattr(self.model, "model", None)
        if not isinstance(layers, torch.nn.ModuleList) or getattr(inner, "decoder", None) is not dec:
            raise ValueError(f"early exit is not available for {type(self.model).__name__} "
                             "(its decoder keeps no 'layers' list); use a Whisper, Marian, BART or M2M100 model")
        if not 1 <= exit_layer <= len(layers):
            raise ValueError(f"exit_layer must be in [1, {len(layers)}] (decoder layers), got {exit_layer}")

        def shallow(module: Any) -> Any:
            twin = copy.copy(module)
            twin._modules = dict(module._modules)  # own child table: the original keeps its children
            return twin

        short = shallow(dec)
        short._modules["layers"] = torch.nn.ModuleList(list(layers)[:exit_layer])
        model = shallow(self.model)
        base = shallow(model.model)
        base._modules["decoder"] = short
        model._modules["model"] = base
        if getattr(model.model.get_decoder(), "layers", None) is not short.layers:
            raise ValueError(f"early exit is not available for {type(self.model).__name__}")
        kept[exit_layer] = model
        return model

    def truncate_cache(self, cache: Any, length: int) -> Any:
        """Keep the first ``length`` decoder positions (``core.backends.base.TruncatableCache``).

        Lean Whisper cache: the preallocated self-attention tensors stay, ``length`` moves
        back (later steps overwrite the rest). Generic path: ``EncoderDecoderCache.crop``
        on the self-attention ``DynamicCache`` (what transformers' assisted generation
        uses to drop rejected draft tokens); the cross-attention keys/values stay.
        The cache is changed in place and returned.

        Raises:
            ValueError: ``length`` outside ``[0, positions held]``.
        """
        held = cache.length if self._lean is not None else int(cache.kv.get_seq_length())
        if not 0 <= length <= held:
            raise ValueError(f"cannot truncate a cache of {held} positions to {length}")
        if self._lean is not None:
            cache.length = length
        elif length < held:
            cache.kv.crop(length - held)  # a negative count removes that many positions (transformers 4 and 5)
        return cache

    def reorder_cache(self, cache: Any, beam_idx: torch.Tensor) -> Any:
        """Select/reorder hypotheses: ``beam_idx`` int64 (new_batch,) indexes the old batch."""
        with torch.inference_mode():
            if self._lean is not None:
                return self._lean.reorder_cache(cache, beam_idx)
            cache.kv.reorder_cache(beam_idx)
            b = beam_idx.shape[0]
            cache.encoder_hidden_states = cache.encoder_hidden_states[:1].expand(b, -1, -1)
            if cache.encoder_attention_mask is not None:
                cache.encoder_attention_mask = cache.encoder_attention_mask[:1].expand(b, -1)
        return cache

    # -- text ----------------------------------------------------------------------
    def token_text(self, token_id: int) -> str:
        """Display text of one token: special tokens as-is, otherwise decoded text
        (so SentencePiece "▁the" and byte-level "Ġthe" both show as " the")."""
        text = self._token_text.get(token_id)
        if text is None:
            tok = self.tokenizer
            if token_id in set(getattr(tok, "all_special_ids", ())):
                text = tok.convert_ids_to_tokens(token_id)
            else:
                piece = tok.convert_ids_to_tokens(token_id)
                text = tok.convert_tokens_to_string([piece]) if piece is not None else f"<{token_id}>"
                if isinstance(piece, str) and piece.startswith("▁") and not text.startswith(" "):
                    text = " " + text  # SentencePiece word start: keep the space visible
            self._token_text[token_id] = text
        return text

    def token_bytes(self, token_id: int) -> bytes | None:
        """The raw bytes of a byte-level BPE token (GPT-2 / Whisper vocabularies: a token may be
        part of a multi-byte UTF-8 character, which ``token_text`` can only show as "\ufffd"), or
        None for a special token or a tokenizer that is not byte-level."""
        tok = self.tokenizer
        special = self.__dict__.get("_special_ids")
        if special is None:  # built once: the GUI asks per listed row
            special = self.__dict__["_special_ids"] = frozenset(getattr(tok, "all_special_ids", ()))
        if token_id in special:
            return None
        piece = tok.convert_ids_to_tokens(int(token_id))
        if not isinstance(piece, str) or not piece:
            return None
        table = _byte_decoder()
        if any(ch not in table for ch in piece):
            return None
        return bytes(table[ch] for ch in piece)

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of ``token_ids``, special tokens skipped."""
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text``, no special tokens (for bad words and logit bias)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    # -- teacher forcing -----------------------------------------------------------
    def forced_logits(self, encoded: EncoderOutput, ids: Sequence[int]) -> torch.Tensor:
        """Teacher forcing in one decoder call: ``ids`` (the prompt, then the tokens to score)
        fed at once on a fresh cache over ``encoded``; float32 (len(ids), vocab), row i = the
        logits of the token after ``ids[: i + 1]`` (the output head, ``LensHead.head``, on
        every position's decoder output). Used by ``core.analysis.refine`` to score a window's
        tokens under muted audio in one pass.

        Raises:
            ValueError: no ids, or more than the decoder holds.
        """
        if len(ids) == 0:
            raise ValueError("forced_logits needs at least one id (the prompt)")
        out = self.step(torch.tensor([list(ids)], dtype=torch.long), self.init_cache(encoded, 1), False)
        with torch.inference_mode():
            if self.dtype == "int8":  # the int8 head the steps use
                return self._lean._head(out.hidden_states[0]).float()
            if self._lens_head is None:
                self._lens_head = LensHead(self.model)
            hidden = out.hidden_states[0].to(device=self.device, dtype=self.model.dtype)
            return self._lens_head.head(hidden).float().cpu()


_BYTE_DECODER: dict[str, int] | None = None


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet, character -> byte (the inverse of its
    ``bytes_to_unicode``: printable bytes stand for themselves, the rest map to 256 + n)."""
    global _BYTE_DECODER
    if _BYTE_DECODER is None:
        keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
            + list(range(ord("®"), ord("ÿ") + 1))
        chars, n = {}, 0
        for b in range(256):
            if b in keep:
                chars[chr(b)] = b
            else:
                chars[chr(256 + n)] = b
                n += 1
        _BYTE_DECODER = chars
    return _BYTE_DECODER
