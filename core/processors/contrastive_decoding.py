"""Contrastive decoding: the expert's scores contrasted with an amateur's (one stage of the chain).

Two amateurs, one stage (``contrastive_amateur``):

- **a smaller model** (``"tiny.en"``): contrastive decoding (Li et al. 2022, "Contrastive
  Decoding: Open-ended Text Generation as Optimization"; O'Brien & Lewis 2023, "Contrastive
  Decoding Improves Reasoning in Large Language Models", Appendix A, Algorithm 2), as
  x-transformers' ``contrastive_decode_fn`` computes it::

      cutoff   = log(alpha) + max(expert)
      contrast = (1 + beta) * expert - beta * amateur,   -inf where expert < cutoff

  on the logits. The amateur is a ``core.speculative.draft.Companion`` (its own encoder
  output and KV cache, its ids mapped into the target's vocabulary) handed to the chain
  by ``Engine.run(amateur=...)``; it is asked for one row of logits per step.

- **an early layer of the same model** (``"layer:L"``, ``"layer:auto"``): DoLa (Chuang et
  al. 2023, "DoLa: Decoding by Contrasting Layers Improves Factuality in Large Language
  Models"; transformers' ``dola_layers``). The premature layer's logits are the logit lens
  (the final norm and output head on the output of the first L decoder layers), which the
  backend gives with ``capture_lens``. DoLa's own contrast has no beta::

      contrast = log_softmax(final) - log_softmax(premature),   -inf where p_final < alpha * max p_final

  (the same plausibility cut: a log-softmax is the logits minus one constant). ``layer:auto``
  picks the premature layer at each step as DoLa's dynamic selection does: the layer whose
  distribution is furthest from the final one by the Jensen-Shannon divergence, computed as
  DoLa's code and transformers' ``_dola_select_contrast`` compute it (``jsd_dola``).

Where it applies: greedy, sampling and mirostat (``core.processors.stages``: the stage's
``strategies`` and ``strategy_note``), as in its references: x-transformers' ``generate`` and
transformers' DoLa (which refuses beams) decode one path token by token, and the amateur model
steps alongside that one path. Beam search, diverse beam search, contrastive search and
speculative decoding refuse an amateur (``DecodingOptions.validate`` raises; the CLI exits 2),
since there it would change nothing (or would have to score every drafted position).

Cost: a model amateur adds one decoder step of the amateur per token (tiny.en beside base on
the bundled clip, one thread, a loaded 2-core machine: 56 -> 76 ms/token); a layer amateur
asks the backend for the logit lens, which projects every decoder layer onto the vocabulary
(layer:L as layer:auto: 56 -> 100-117 ms/token).

The differences from the references, each deliberate:
- filtered tokens get ``-inf`` (this chain's convention, ``core.processors.warpers.NEG_INF``)
  where x-transformers writes ``-finfo.max``; the kept tokens' values are the same numbers;
- a target id the amateur model has no single token for (its ``logits`` give ``-inf``: a
  multilingual expert's language tokens against an English-only amateur, or a BPE piece the
  amateur's tokenizer lacks — whisper tiny.en and base share only 30,986 pieces) is left
  uncontrasted: the amateur's log-probability there is taken to be the expert's own
  (``amateur := expert - logsumexp(expert) + logsumexp(amateur's known ids)``), so in
  log-probabilities the contrast ``(1 + beta) * log p_e - beta * log p_e = log p_e`` is the
  expert's own there, while a known id gets ``log p_e + beta * (log p_e - log p_a)``. The amateur
  says nothing about such a token, so it is neither pushed down nor promoted. (Taking the expert's
  raw logit instead would make this depend on the two models' arbitrary logit offsets; a fill
  with the row's lowest amateur logit gave it ``beta * (max - min)`` more than the expert, and it
  won.) The plausibility cut still applies to it. The chain view shows the amateur's probability
  of it as 0;
- ``layer:auto`` picks a layer per row (transformers averages the divergence over the batch;
  this app's greedy and sampling runs are batch 1, where the two agree);
- the stage sees the scores that enter it (the model's hard rules, e.g. suppressed tokens,
  already applied, as for every stage of this chain); DoLa in transformers contrasts first and
  suppresses after, so the plausibility cut's maximum can differ when a suppressed token was the
  model's best.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from core.processors.amateur import LAYER_PREFIX, Amateur, parse_amateur  # noqa: F401 (re-exported)

NEG_INF = float("-inf")


def plausible(expert: torch.Tensor, alpha: float) -> torch.Tensor:
    """The plausibility constraint (Li et al. 2022, the adaptive plausibility set): bool
    (batch, vocab), True where ``expert >= log(alpha) + max(expert)`` (per row), i.e. where
    the expert's probability is at least ``alpha`` times its best token's."""
    cutoff = math.log(alpha) + expert.amax(dim=-1, keepdim=True)
    return expert >= cutoff


def contrast(expert: torch.Tensor, amateur: torch.Tensor, alpha: float, beta: float) -> torch.Tensor:
    """Contrastive decoding of one step (O'Brien & Lewis 2023, Algorithm 2; x-transformers
    ``contrastive_decode_fn``): ``(1 + beta) * expert - beta * amateur`` where the expert's
    logit is at least ``log(alpha) + max(expert)``, ``-inf`` elsewhere.

    Args:
        expert, amateur: float32 (batch, vocab) logits (any per-row offset: the cut is
            relative, and a constant offset of a row does not change its softmax).
        alpha: the plausibility threshold in (0, 1].
        beta: the amateur's weight, >= 0 (0: the plausibility cut alone).

    Returns:
        float32 (batch, vocab), a new tensor.
    """
    diffs = (1 + beta) * expert - beta * amateur
    return diffs.masked_fill(~plausible(expert, alpha), NEG_INF)


def dola_contrast(final: torch.Tensor, premature: torch.Tensor, alpha: float) -> torch.Tensor:
    """DoLa's contrast of one step (Chuang et al. 2023, Eq. 3-4; transformers
    ``_relative_top_filter`` with ``relative_top=alpha``): ``log_softmax(final) -
    log_softmax(premature)`` where ``p_final >= alpha * max p_final``, ``-inf`` elsewhere.

    Args:
        final: float32 (batch, vocab): the mature (final) layer's scores.
        premature: float32 (batch, vocab): the premature layer's logits.
        alpha: the plausibility threshold in (0, 1].
    """
    final_logp = final.log_softmax(dim=-1)
    keep = final_logp >= final_logp.amax(dim=-1, keepdim=True) + math.log(alpha)
    return (final_logp - premature.log_softmax(dim=-1)).masked_fill(~keep, NEG_INF)


def jsd_dola(final: torch.Tensor, layers: torch.Tensor) -> torch.Tensor:
    """The divergence DoLa's dynamic layer selection maximises, float32 (layers, batch):
    ``0.5 * (mean_v KL-term(M, final) + mean_v KL-term(M, layer))`` with ``M`` the average
    of the two distributions, as DoLa's code and transformers' ``_dola_select_contrast``
    compute it with ``F.kl_div(log p, M, reduction="none").mean(-1)`` (the Jensen-Shannon
    divergence of the paper, Eq. 5, with KL(M || p) terms averaged over the vocabulary;
    the chosen layer is its argmax).

    Args:
        final: float32 (batch, vocab) logits of the final layer.
        layers: float32 (n_layers, batch, vocab) logits of the candidate premature layers.
    """
    p_final, p_layers = final.softmax(dim=-1), layers.softmax(dim=-1)
    m = 0.5 * (p_final[None] + p_layers)
    kl1 = torch.nn.functional.kl_div(final.log_softmax(dim=-1)[None].expand_as(layers), m, reduction="none").mean(-1)
    kl2 = torch.nn.functional.kl_div(layers.log_softmax(dim=-1), m, reduction="none").mean(-1)
    return 0.5 * (kl1 + kl2)


@dataclass
class ContrastStep:
    """What the stage did at its last call, for the sampler-chain view.

    Attributes:
        amateur: float32 (batch, vocab): the amateur's logits it contrasted with (the
            premature layer's lens logits for DoLa; the amateur model's mapped logits, ``-inf``
            at target ids it has no single token for: those were left uncontrasted).
        layer: per row, the premature layer used (number of decoder layers, as ``layer:L``),
            or None for a model amateur.
        divergence: per row, DoLa's divergence of that layer from the final one (``jsd_dola``)
            for ``layer:auto``; None otherwise.
    """

    amateur: torch.Tensor
    layer: list[int] | None = None
    divergence: list[float] | None = None

    def note(self, row: int, amateur: Amateur, n_layers: int | None) -> str:
        """One line for row ``row``: which amateur was used ("layer 3 of 6 (JS 0.0123)", "tiny.en")."""
        if self.layer is None:
            return f"amateur {amateur.model}"
        text = f"layer {self.layer[row]}" + (f" of {n_layers}" if n_layers else "")
        if self.divergence is not None:
            text += f" (auto, JS {self.divergence[row]:.3g})"
        return "amateur " + text


class ContrastiveDecoding:
    """The contrastive-decoding stage: ``(input_ids, scores) -> scores`` (see the module docstring).

    Args:
        amateur: the parsed ``contrastive_amateur`` (``parse_amateur``).
        alpha: the plausibility threshold in (0, 1] (``cd_alpha``, x-transformers' and DoLa's 0.1).
        beta: the amateur's weight for a model amateur, >= 0 (``cd_beta``, x-transformers' 0.5);
            DoLa has none.
        companion: the amateur model (``core.speculative.draft.Companion``) for a model amateur.

    A layer amateur reads the step's logit lens, handed over by the engine before the chain
    runs (``see_step``); ``needs_lens`` tells the engine to ask the backend for it.

    Attributes:
        last: what the last call did (``ContrastStep``), or None before the first call.

    Raises:
        ValueError: alpha outside (0, 1], beta < 0.
    """

    name = "contrastive_decoding"

    def __init__(self, amateur: Amateur, alpha: float, beta: float, companion: Any = None):
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"cd_alpha must be in (0, 1], got {alpha}")
        if not beta >= 0.0:
            raise ValueError(f"cd_beta must be >= 0, got {beta}")
        self.amateur, self.alpha, self.beta, self.companion = amateur, float(alpha), float(beta), companion
        self.needs_lens = amateur.kind == "layer"
        self.n_layers: int | None = None
        self.last: ContrastStep | None = None
        self._lens: torch.Tensor | None = None

    def stage_extras(self) -> list[tuple[torch.Tensor, str]]:
        """For the sampler-chain view, per row of the last call: (the amateur's logits float32
        (vocab,), a one-line note of which amateur: "amateur layer 3 of 6 (auto, JS 0.0123)");
        [] before the first call."""
        last = self.last
        if last is None:
            return []
        return [(last.amateur[row], last.note(row, self.amateur, self.n_layers)) for row in range(last.amateur.shape[0])]

    def see_step(self, out: Any) -> None:
        """Take the step's logit lens (``StepOutput.lens_logits``, float32 (batch, decoder
        layers, vocab), the last layer being the model's logits) before the chain runs."""
        self._lens = getattr(out, "lens_logits", None)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """The contrasted ``scores`` float32 (batch, vocab) (new tensor).

        Raises:
            RuntimeError: a layer amateur without the step's lens (the backend gives none),
                or a model amateur without its companion (the task did not load it).
            ValueError: ``layer:L`` at or beyond the model's decoder layers.
        """
        if self.amateur.kind == "layer":
            return self._dola(scores)
        return self._model(input_ids, scores)

    # -------------------------------------------------------------- the two amateurs
    def _model(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.companion is None:
            raise RuntimeError(
                f"contrastive decoding with amateur {self.amateur.model!r} needs that model loaded beside the "
                "expert; this run was started without it (Engine.run(amateur=...)). Use a task that loads it, or "
                "an early layer as the amateur (layer:auto)"
            )
        rows = [self.companion.logits(ids, 1)[-1] for ids in input_ids.tolist()]
        amateur = torch.stack(rows).to(scores.dtype)
        if amateur.shape != scores.shape:
            raise RuntimeError(
                f"the amateur {self.amateur.model!r} gives logits of shape {tuple(amateur.shape)} for the expert's "
                f"{tuple(scores.shape)}; its ids must be mapped into the expert's vocabulary"
            )
        self.last = ContrastStep(amateur)
        return contrast(scores, _uncontrasted_where_unknown(amateur, scores), self.alpha, self.beta)

    def _dola(self, scores: torch.Tensor) -> torch.Tensor:
        lens = self._lens
        if lens is None:
            raise RuntimeError(
                "contrastive decoding with an early layer (DoLa) needs the logit lens of each step, which this "
                "backend does not give; use a model amateur or turn contrastive decoding off"
            )
        self._lens = None  # one step's lens serves one call
        n_layers = lens.shape[1]
        self.n_layers = n_layers
        if n_layers < 2:
            raise ValueError("DoLa needs a model with at least 2 decoder layers (a premature one and the final one)")
        lens = lens.to(scores.dtype)
        if self.amateur.layer is not None:
            if self.amateur.layer >= n_layers:
                raise ValueError(
                    f"contrastive_amateur layer:{self.amateur.layer}: this model has {n_layers} decoder layers; "
                    f"give 1 … {n_layers - 1} (the output of the first L layers) or layer:auto"
                )
            chosen = [self.amateur.layer] * scores.shape[0]
            divergence = None
        else:
            candidates = lens[:, :-1].transpose(0, 1)  # (n_layers - 1, batch, vocab)
            js = jsd_dola(lens[:, -1], candidates)  # (n_layers - 1, batch)
            best = js.argmax(dim=0)
            chosen = [int(i) + 1 for i in best.tolist()]
            divergence = [float(js[i, b]) for b, i in enumerate(best.tolist())]
        rows = torch.arange(scores.shape[0])
        premature = lens[rows, torch.tensor([c - 1 for c in chosen])]  # (batch, vocab)
        self.last = ContrastStep(premature, chosen, divergence)
        return dola_contrast(scores, premature, self.alpha)


def _uncontrasted_where_unknown(amateur: torch.Tensor, expert: torch.Tensor) -> torch.Tensor:
    """``amateur`` float32 (batch, vocab) logits with its ``-inf`` entries (target ids the amateur
    has no single token for) replaced so that the amateur's log-probability there equals the
    expert's (``expert`` float32, same shape): ``expert - logsumexp(expert) + logsumexp(amateur)``
    per row, the amateur's logsumexp over the ids it knows. The contrast ``(1 + beta) * expert -
    beta * amateur`` there is then the expert's logit plus the row's constant ``beta *
    (logsumexp(expert) - logsumexp(amateur))``, i.e. the expert's own log-probability in the
    contrast's scale. A row the amateur knows nothing of takes the expert's logits as they are.
    Returns a new tensor, or ``amateur`` itself when nothing is unknown. Where the expert is
    ``-inf`` too, the contrast's plausibility cut gives ``-inf`` (the NaN of ``-inf + inf`` is
    masked)."""
    unknown = torch.isneginf(amateur)
    if not unknown.any():
        return amateur
    offset = amateur.logsumexp(dim=-1, keepdim=True) - expert.logsumexp(dim=-1, keepdim=True)
    offset = torch.where(torch.isfinite(offset), offset, torch.zeros_like(offset))
    return torch.where(unknown, expert + offset, amateur)
