"""Whisper (Radford et al. 2022) as plain ``torch.nn.Module`` classes, for the bundled models.

Importing transformers' ``modeling_whisper`` costs about 210 MB of resident memory before
any weight is loaded: it imports ``transformers.modeling_utils``, which imports
``torch.distributed.tensor``, ``torch._dynamo`` and sympy. The app drives Whisper step by step
itself (``core.backends.hf`` and ``core.backends.whisper_lean``), so it needs the network's
forward pass only. ``WhisperNet`` is that network, with exactly transformers' parameter names
and module paths (``model.encoder.conv1``, ``model.encoder.layers.0.self_attn.q_proj``,
``model.decoder.layers.0.encoder_attn``, ``proj_out``, ...), so state dicts are
interchangeable with ``transformers.WhisperForConditionalGeneration``, and the part of its
interface the app uses:

- ``config`` (a ``WhisperConfig``) and ``generation_config`` (a ``GenerationConfig``);
- ``get_encoder()``, ``get_decoder()``, ``get_output_embeddings()``, ``dtype``, ``device``;
- ``forward`` with ``input_features`` or ``encoder_outputs``, ``decoder_input_ids``,
  ``past_key_values``/``cache`` (a transformers ``EncoderDecoderCache``, updated as
  transformers updates it), ``output_attentions``, ``output_hidden_states``, returning
  transformers' ``Seq2SeqLMOutput`` (``logits``, ``past_key_values``, ``decoder_hidden_states``,
  ``decoder_attentions``, ``cross_attentions``);
- the attention kernel chosen by each attention module's ``config._attn_implementation``:
  "eager" (softmax weights materialised and returned: the decoder, whose cross-attention the
  app shows) or "sdpa" (``scaled_dot_product_attention``: the encoder, see
  ``core.backends.whisper_ct2.encoder_sdpa``).

The maths follows transformers' ``models/whisper/modeling_whisper.py`` (5.x) operation by
operation (queries scaled by ``head_dim ** -0.5`` before the product, pre-norm blocks, exact
GELU, learned decoder positions, the encoder's fixed sinusoids loaded as weights), so logits
and attention weights equal transformers' to float32 rounding
(``tests/core/test_whisper_net.py``).

``generate()`` and ``detect_language()`` are transformers' own: the first call builds a
``WhisperForConditionalGeneration`` on the meta device and gives it this model's leaf modules
(the same ``nn.Linear``/``Int8Linear``/``LayerNorm``/... objects: no copy, int8 layers and
the transposed output projection included), then calls it. Only that call imports
transformers' modeling code (tests and benchmarks compare against ``generate()``).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["WhisperNet"]


def _activation(name: str):
    """The feed-forward activation ``config.activation_function`` names ("gelu" for every
    Whisper checkpoint: exact GELU, as transformers' ``GELUActivation``)."""
    if name == "gelu":
        return nn.GELU()  # a module, as transformers' (its place in the module tree is the same)
    from transformers.activations import ACT2FN  # other names: transformers' table (no modeling import)

    return ACT2FN[name]


def _embedding(cls, num: int, dim: int, padding_idx: int | None = None) -> nn.Embedding:
    """``cls(num, dim, padding_idx)`` with an uninitialised weight: the model is built on the meta
    device and loaded after, and ``nn.init.normal_`` on the meta device imports ``torch._dynamo``
    (100 MB) through ``torch._refs``."""
    return cls(num, dim, padding_idx, _weight=torch.empty(num, dim))


class WhisperPositionalEmbedding(nn.Embedding):
    """The decoder's learned positions; ``forward`` as transformers' class of this name (its
    ``generate()`` calls it with ``cache_length`` and ``position_ids``)."""

    def forward(self, input_ids, cache_length: int = 0, position_ids=None):  # noqa: D401
        """Rows ``cache_length .. cache_length + input_ids.shape[1]`` (or ``position_ids``)."""
        if position_ids is None:
            return self.weight[cache_length: cache_length + input_ids.shape[1]]
        return self.weight[position_ids]


class WhisperAttention(nn.Module):
    """Multi-head attention with transformers' Whisper parameters (``k_proj`` has no bias).

    ``forward(hidden_states (batch, len, d), key_value_states=None, cache=None,
    attention_mask=None)`` -> (output (batch, len, d), weights (batch, heads, len, kv_len) or
    None with SDPA). ``key_value_states`` (batch, src, d) makes it cross-attention. ``cache``: a
    transformers ``EncoderDecoderCache``; self-attention appends this call's keys/values to its
    ``self_attention_cache``; cross-attention projects the encoder states once per layer
    (``is_updated``) and reuses them from ``cross_attention_cache`` after.
    """

    def __init__(self, config: Any, embed_dim: int, num_heads: int, *, is_decoder: bool = False,
                 is_causal: bool = False, layer_idx: int | None = None):
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ValueError(f"d_model {embed_dim} is not divisible by the {num_heads} attention heads.")
        self.config = config
        self.scaling = self.head_dim ** -0.5
        self.is_decoder, self.is_causal, self.layer_idx = is_decoder, is_causal, layer_idx
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, hidden_states: torch.Tensor, key_value_states: torch.Tensor | None = None,
                cache: Any = None, attention_mask: torch.Tensor | None = None, **_: Any):
        """See the class docstring."""
        cross = key_value_states is not None
        input_shape = hidden_states.shape[:-1]
        query = (self.q_proj(hidden_states) * self.scaling).view(*input_shape, -1, self.head_dim)
        query = query.transpose(1, 2).contiguous()
        updated = False
        if cache is not None and hasattr(cache, "self_attention_cache"):
            updated = cache.is_updated.get(self.layer_idx)
            if cross:
                cache.is_updated[self.layer_idx] = True
                cache = cache.cross_attention_cache
            else:
                cache = cache.self_attention_cache
        source = key_value_states if cross else hidden_states
        if cross and cache is not None and updated:
            key, value = cache.layers[self.layer_idx].keys, cache.layers[self.layer_idx].values
        else:
            kv_shape = (input_shape[0], -1, self.num_heads, self.head_dim)
            key = self.k_proj(source).view(kv_shape).transpose(1, 2).contiguous()
            value = self.v_proj(source).view(kv_shape).transpose(1, 2).contiguous()
            if cache is not None:
                key, value = cache.update(key, value, self.layer_idx)
        if self.config._attn_implementation == "sdpa":
            causal = self.is_causal and attention_mask is None and query.shape[2] > 1
            out = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=0.0,
                                                 scale=1.0, is_causal=causal)
            weights = None
        else:  # eager: transformers' eager_attention_forward with scaling 1.0 (q is scaled above)
            scores = torch.matmul(query, key.transpose(2, 3))
            if attention_mask is not None:
                scores = scores + attention_mask
            weights = F.softmax(scores, dim=-1)
            out = torch.matmul(weights, value)
        out = out.transpose(1, 2).contiguous().reshape(*input_shape, -1).contiguous()
        return self.out_proj(out), weights


class WhisperEncoderLayer(nn.Module):
    """Pre-norm self-attention block, then pre-norm feed-forward block."""

    def __init__(self, config: Any):
        super().__init__()
        d = config.d_model
        self.embed_dim = d
        self.self_attn = WhisperAttention(config, d, config.encoder_attention_heads)
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.activation_fn = _activation(config.activation_function)
        self.fc1 = nn.Linear(d, config.encoder_ffn_dim)
        self.fc2 = nn.Linear(config.encoder_ffn_dim, d)
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                **_: Any) -> torch.Tensor:
        """(batch, frames, d) -> (batch, frames, d)."""
        h, _w = self.self_attn(self.self_attn_layer_norm(hidden_states), attention_mask=attention_mask)
        hidden_states = hidden_states + h
        h = self.fc2(self.activation_fn(self.fc1(self.final_layer_norm(hidden_states))))
        hidden_states = hidden_states + h
        if hidden_states.dtype == torch.float16:
            clamp = torch.finfo(hidden_states.dtype).max - 1000
            hidden_states = torch.clamp(hidden_states, min=-clamp, max=clamp)
        return hidden_states


class WhisperDecoderLayer(nn.Module):
    """Pre-norm causal self-attention, cross-attention over the encoder states, feed-forward;
    ``forward`` returns (hidden states, self-attention weights, cross-attention weights)."""

    def __init__(self, config: Any, layer_idx: int):
        super().__init__()
        d = config.d_model
        self.embed_dim = d
        heads = config.decoder_attention_heads
        self.self_attn = WhisperAttention(config, d, heads, is_decoder=True, is_causal=True, layer_idx=layer_idx)
        self.activation_fn = _activation(config.activation_function)
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.encoder_attn = WhisperAttention(config, d, heads, is_decoder=True, layer_idx=layer_idx)
        self.encoder_attn_layer_norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, config.decoder_ffn_dim)
        self.fc2 = nn.Linear(config.decoder_ffn_dim, d)
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                encoder_hidden_states: torch.Tensor | None = None, cache: Any = None, **_: Any):
        """``hidden_states`` (batch, len, d); ``attention_mask`` additive (batch or 1, 1, len,
        kv_len) or None; ``encoder_hidden_states`` (batch, src, d)."""
        h, self_w = self.self_attn(self.self_attn_layer_norm(hidden_states), cache=cache,
                                   attention_mask=attention_mask)
        hidden_states = hidden_states + h
        cross_w = None
        if encoder_hidden_states is not None:
            h, cross_w = self.encoder_attn(self.encoder_attn_layer_norm(hidden_states),
                                           key_value_states=encoder_hidden_states, cache=cache)
            hidden_states = hidden_states + h
        h = self.fc2(self.activation_fn(self.fc1(self.final_layer_norm(hidden_states))))
        return hidden_states + h, self_w, cross_w


class WhisperEncoder(nn.Module):
    """Two convolutions (the second with stride 2), fixed positions, pre-norm layers, a final
    layer norm: log-mel (batch, n_mels, 2 * max_source_positions) -> (batch,
    max_source_positions, d_model)."""

    main_input_name = "input_features"

    def __init__(self, config: Any):
        super().__init__()
        self.config = config
        d = config.d_model
        self.num_mel_bins = config.num_mel_bins
        self.max_source_positions = config.max_source_positions
        self.embed_scale = math.sqrt(d) if config.scale_embedding else 1.0
        self.conv1 = nn.Conv1d(self.num_mel_bins, d, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(d, d, kernel_size=3, stride=2, padding=1)
        self.embed_positions = _embedding(nn.Embedding, self.max_source_positions, d)
        self.embed_positions.requires_grad_(False)
        self.layers = nn.ModuleList([WhisperEncoderLayer(config) for _ in range(config.encoder_layers)])
        self.layer_norm = nn.LayerNorm(d)

    def forward(self, input_features: torch.Tensor, attention_mask: Any = None, output_attentions: bool = False,
                output_hidden_states: bool = False, return_dict: bool = True, **_: Any):
        """Returns transformers' ``BaseModelOutput`` (``last_hidden_state``; ``hidden_states``:
        the input of layer 0, then every layer's output, the last one after the final norm,
        if ``output_hidden_states``). ``attention_mask`` is ignored, as in transformers.

        Raises:
            ValueError: ``input_features`` is not ``2 * max_source_positions`` frames long
                (3000 for Whisper: 30 s; pad shorter audio).
        """
        from transformers.modeling_outputs import BaseModelOutput

        expected = self.max_source_positions * self.conv1.stride[0] * self.conv2.stride[0]
        if input_features.shape[-1] != expected:
            raise ValueError(f"Whisper expects the mel input features to be of length {expected}, but found "
                             f"{input_features.shape[-1]}. Make sure to pad the input mel features to {expected}.")
        x = F.gelu(self.conv1(input_features))
        x = F.gelu(self.conv2(x)).permute(0, 2, 1)
        x = x + self.embed_positions.weight
        states = [x] if output_hidden_states else None
        for layer in self.layers:
            x = layer(x, None)
            if states is not None:
                states.append(x)
        x = self.layer_norm(x)
        if states is not None:
            states[-1] = x
        return BaseModelOutput(last_hidden_state=x, hidden_states=tuple(states) if states is not None else None)


def _causal_mask(batch: int, new_len: int, past: int, dtype: torch.dtype, device: Any,
                 padding: torch.Tensor | None = None) -> torch.Tensor | None:
    """Additive mask (batch, 1, new_len, past + new_len): 0 where position ``past + i`` may
    attend key ``j`` (``j <= past + i`` and, with ``padding`` (batch, past + new_len) 0/1, a
    non-padding key), the dtype's lowest value elsewhere (as transformers' eager mask); None
    when nothing is masked (one new position and no padding)."""
    if new_len == 1 and (padding is None or bool(padding.all())):
        return None
    total = past + new_len
    allowed = torch.arange(total, device=device)[None, :] <= torch.arange(past, total, device=device)[:, None]
    allowed = allowed[None, None].expand(batch, 1, new_len, total)
    if padding is not None:
        allowed = allowed & padding[:, None, None, -total:].bool()
    mask = torch.zeros(allowed.shape, dtype=dtype, device=device)
    return mask.masked_fill(~allowed, torch.finfo(dtype).min)


class WhisperDecoder(nn.Module):
    """Token embeddings plus learned positions, pre-norm layers with causal self-attention and
    cross-attention, a final layer norm."""

    main_input_name = "input_ids"

    def __init__(self, config: Any):
        super().__init__()
        self.config = config
        d = config.d_model
        self.padding_idx = config.pad_token_id
        self.max_target_positions = config.max_target_positions
        self.max_source_positions = config.max_source_positions
        self.embed_scale = math.sqrt(d) if config.scale_embedding else 1.0
        self.embed_tokens = _embedding(nn.Embedding, config.vocab_size, d, self.padding_idx)
        self.embed_positions = _embedding(WhisperPositionalEmbedding, self.max_target_positions, d)
        self.layers = nn.ModuleList([WhisperDecoderLayer(config, i) for i in range(config.decoder_layers)])
        self.layer_norm = nn.LayerNorm(d)

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                encoder_hidden_states: torch.Tensor | None = None, cache: Any = None,
                inputs_embeds: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                use_cache: bool | None = None, output_attentions: bool = False,
                output_hidden_states: bool = False, return_dict: bool = True, past_key_values: Any = None,
                **_: Any):
        """Feed ``input_ids`` (batch, new_len) after the positions held in ``cache``.

        Returns transformers' ``BaseModelOutputWithPastAndCrossAttentions``:
        ``last_hidden_state`` (batch, new_len, d) after the final norm, ``cache`` (the
        ``EncoderDecoderCache``, a new one when ``use_cache`` and none was given),
        ``hidden_states`` (embeddings, then each layer's output, the last one after the final
        norm), ``attentions`` and ``cross_attentions`` (per layer (batch, heads, new_len,
        kv_len)) when ``output_attentions``.

        Raises:
            ValueError: both or neither of ``input_ids`` and ``inputs_embeds``.
        """
        from transformers.modeling_outputs import BaseModelOutputWithPastAndCrossAttentions

        cache = cache if cache is not None else past_key_values
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of decoder_input_ids and decoder_inputs_embeds.")
        if use_cache is None:
            use_cache = getattr(self.config, "use_cache", True)
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        if use_cache and cache is None:
            from transformers.cache_utils import DynamicCache, EncoderDecoderCache

            cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
        past = int(cache.get_seq_length()) if cache is not None else 0
        batch, new_len = inputs_embeds.shape[:2]
        if position_ids is None:
            positions = self.embed_positions.weight[past: past + new_len]
        else:
            positions = self.embed_positions.weight[position_ids]
        x = inputs_embeds + positions
        mask = _causal_mask(batch, new_len, past, x.dtype, x.device, attention_mask)
        states = [x] if output_hidden_states else None
        self_ws: list | None = [] if output_attentions else None
        cross_ws: list | None = [] if output_attentions else None
        for layer in self.layers:
            x, self_w, cross_w = layer(x, mask, encoder_hidden_states, cache=cache if use_cache else None)
            if states is not None:
                states.append(x)
            if self_ws is not None:
                self_ws.append(self_w)
                cross_ws.append(cross_w)
        x = self.layer_norm(x)
        if states is not None:
            states[-1] = x
        return BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=x, cache=cache if use_cache else None,
            hidden_states=tuple(states) if states is not None else None,
            attentions=tuple(self_ws) if self_ws is not None else None,
            cross_attentions=tuple(cross_ws) if cross_ws is not None and encoder_hidden_states is not None else None,
        )


class WhisperNetModel(nn.Module):
    """The encoder-decoder body (transformers' ``WhisperModel``): ``encoder``, ``decoder``."""

    def __init__(self, config: Any):
        super().__init__()
        self.config = config
        self.encoder = WhisperEncoder(config)
        self.decoder = WhisperDecoder(config)

    def get_encoder(self) -> WhisperEncoder:
        """The encoder."""
        return self.encoder

    def get_decoder(self) -> WhisperDecoder:
        """The decoder."""
        return self.decoder


class WhisperNet(nn.Module):
    """Whisper with transformers' module tree and the interface the app uses (see the module
    docstring); state dicts load both ways with ``WhisperForConditionalGeneration``.

    Args:
        config: a transformers ``WhisperConfig`` (``d_model``, layer and head counts, FFN
            widths, ``num_mel_bins``, ``max_source_positions``, ``max_target_positions``,
            ``vocab_size``, ``activation_function``); its ``_attn_implementation`` ("eager" or
            "sdpa") picks each attention's kernel. Build on the meta device and
            ``load_state_dict(..., assign=True)`` to load without initialising, then
            ``tie_weights()``.
    """

    main_input_name = "input_features"

    def __init__(self, config: Any):
        super().__init__()
        self.config = config
        self.generation_config = None
        self.model = WhisperNetModel(config)
        self.proj_out = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.tie_weights()

    # -- the transformers interface the app reads ------------------------------------
    def tie_weights(self) -> None:
        """Make ``proj_out.weight`` the decoder's embedding matrix (one tensor, as Whisper ties them)."""
        self.proj_out.weight = self.model.decoder.embed_tokens.weight

    def get_encoder(self) -> WhisperEncoder:
        """The encoder (``forward(input_features)`` -> ``BaseModelOutput``)."""
        return self.model.get_encoder()

    def get_decoder(self) -> WhisperDecoder:
        """The decoder."""
        return self.model.get_decoder()

    def get_output_embeddings(self) -> nn.Module:
        """The output projection ``proj_out`` (vocab rows, tied to the embeddings)."""
        return self.proj_out

    @property
    def dtype(self) -> torch.dtype:
        """The floating dtype of the weights (float32)."""
        return self.model.decoder.embed_tokens.weight.dtype

    @property
    def device(self) -> torch.device:
        """Where the weights are."""
        return self.model.decoder.embed_tokens.weight.device

    def forward(self, input_features: torch.Tensor | None = None, attention_mask: Any = None,
                decoder_input_ids: torch.Tensor | None = None, decoder_attention_mask: torch.Tensor | None = None,
                encoder_outputs: Any = None, past_key_values: Any = None, cache: Any = None,
                decoder_inputs_embeds: torch.Tensor | None = None, decoder_position_ids: torch.Tensor | None = None,
                use_cache: bool | None = None, output_attentions: bool | None = None,
                output_hidden_states: bool | None = None, return_dict: bool | None = None, **kwargs: Any):
        """transformers' ``WhisperForConditionalGeneration.forward`` without training (no
        ``labels``): the encoder on ``input_features`` (float (batch, n_mels, 3000)) unless
        ``encoder_outputs`` is given, then the decoder on ``decoder_input_ids`` (int64 (batch,
        new_len)) after the positions in ``past_key_values`` (an ``EncoderDecoderCache``).

        Returns:
            transformers' ``Seq2SeqLMOutput``: ``logits`` float (batch, new_len, vocab),
            ``past_key_values``, ``decoder_hidden_states``, ``decoder_attentions``,
            ``cross_attentions`` (each per layer (batch, heads, new_len, kv_len)),
            ``encoder_last_hidden_state``.

        Raises:
            TypeError: ``labels`` or another argument this model does not take.
            ValueError: no encoder input, or see the encoder and decoder.
        """
        from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput

        if kwargs:
            raise TypeError(f"WhisperNet.forward got arguments it does not take: {sorted(kwargs)} "
                            "(training with labels needs transformers' WhisperForConditionalGeneration).")
        output_attentions = bool(output_attentions)
        output_hidden_states = bool(output_hidden_states)
        if encoder_outputs is None:
            if input_features is None:
                raise ValueError("Pass input_features or encoder_outputs.")
            encoder_outputs = self.model.encoder(input_features, output_hidden_states=output_hidden_states)
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(
                last_hidden_state=encoder_outputs[0],
                hidden_states=encoder_outputs[1] if len(encoder_outputs) > 1 else None,
            )
        dec = self.model.decoder(
            input_ids=decoder_input_ids, attention_mask=decoder_attention_mask,
            encoder_hidden_states=encoder_outputs.last_hidden_state,
            cache=cache if cache is not None else past_key_values, inputs_embeds=decoder_inputs_embeds,
            position_ids=decoder_position_ids, use_cache=use_cache, output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )
        return Seq2SeqLMOutput(
            logits=self.proj_out(dec.last_hidden_state),
            cache=dec.cache,
            decoder_hidden_states=dec.hidden_states,
            decoder_attentions=dec.attentions,
            cross_attentions=dec.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
        )

    # -- transformers' generation, over the same modules -------------------------------
    def _transformers_twin(self):
        """A transformers ``WhisperForConditionalGeneration`` made of this model's leaf modules
        (shared, not copied; rebuilt when a leaf was replaced, e.g. by int8 quantisation), its
        attention modules reading the same configs and ``generation_config`` this model's.

        Raises:
            RuntimeError: this model has a leaf module transformers' tree has no place for, or
                a transformers parameter was left without a tensor.
        """
        leaves = [(name, module) for name, module in self.named_modules() if next(module.children(), None) is None]
        key = tuple((name, id(module)) for name, module in leaves)
        kept = self.__dict__.get("_twin")
        if kept is not None and kept[0] == key:
            twin = kept[1]
        else:
            from transformers import WhisperForConditionalGeneration

            config = copy.deepcopy(self.config)
            config._attn_implementation = "eager"
            with torch.device("meta"):
                twin = WhisperForConditionalGeneration(config)
            for name, module in leaves:
                parent_name, _, attr = name.rpartition(".")
                try:
                    parent = twin.get_submodule(parent_name) if parent_name else twin
                except AttributeError as e:
                    raise RuntimeError(f"WhisperNet module {name!r} has no place in transformers' Whisper") from e
                setattr(parent, attr, module)
            meta = [n for n, t in list(twin.named_parameters()) + list(twin.named_buffers()) if t.is_meta]
            if meta:
                raise RuntimeError(f"transformers' Whisper kept parameters without tensors: {meta[:5]}")
            twin.eval()
            self.__dict__["_twin"] = (key, twin)  # not a submodule: outside the state dict and module tree
        # the kernels and generation settings this model has now
        for name, module in self.named_modules():
            if isinstance(module, WhisperAttention):
                twin.get_submodule(name).config = module.config
        twin.generation_config = self.generation_config
        return twin

    def generate(self, *args: Any, **kwargs: Any):
        """transformers' ``WhisperForConditionalGeneration.generate`` on this model's weights
        (``_transformers_twin``; the first call imports transformers' modeling code). int8
        layers (``core.backends.int8.Int8Linear``) run as they are: generate() then decodes in
        int8 too."""
        return self._transformers_twin().generate(*args, **kwargs)

    def detect_language(self, *args: Any, **kwargs: Any):
        """transformers' ``WhisperForConditionalGeneration.detect_language`` on this model's
        weights (as ``generate``)."""
        return self._transformers_twin().detect_language(*args, **kwargs)
