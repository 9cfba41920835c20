"""Decoding options: one frozen dataclass, validated once.

Modelled on openai/whisper ``whisper/decoding.py`` (``DecodingOptions`` and
``_verify_options``): every impossible combination raises ``ValueError`` with a
message that says what to change.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

STRATEGIES = ("greedy", "sample", "beam")


@dataclass(frozen=True)
class DecodingOptions:
    """How the decoder chooses tokens. Immutable; use ``dataclasses.replace`` or ``with_``.

    All probabilities shown to the user are computed after the processors
    (repetition penalty, no-repeat-ngram, temperature, top-k, top-p) in that order,
    the order transformers' ``generate()`` applies them.
    """

    # "greedy" (argmax), "sample" (multinomial), "beam" (beam search)
    strategy: str = "greedy"
    # logits are divided by this before softmax; > 0. 1.0 = unchanged
    temperature: float = 1.0
    # keep only the k most probable tokens; 0 = off
    top_k: int = 0
    # nucleus: keep the smallest set of tokens whose probability sums to >= top_p; 1.0 = off
    top_p: float = 1.0
    # CTRL-style penalty (Keskar et al. 2019) on tokens already generated; 1.0 = off
    repetition_penalty: float = 1.0
    # forbid repeating any n-gram of this size; 0 = off
    no_repeat_ngram_size: int = 0
    # beam width for strategy "beam"
    num_beams: int = 4
    # beam score = sum log-prob / length ** length_penalty (transformers' convention)
    length_penalty: float = 1.0
    # upper bound on generated tokens (the forced prompt not counted)
    max_new_tokens: int = 128
    # seed for sampling; None = nondeterministic
    seed: int | None = 0
    # how many alternatives each StepEvent reports (processed and raw top-k)
    top_k_report: int = 10
    # report cross-attention (layers, heads, source_len) with each step
    capture_attention: bool = True

    def validate(self) -> "DecodingOptions":
        """Check the options; return ``self`` so calls chain.

        Raises:
            ValueError: naming the bad field, its value and the allowed range.
        """
        if self.strategy not in STRATEGIES:
            raise ValueError(
                f"strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}"
            )
        if not self.temperature > 0:
            raise ValueError(
                f"temperature must be > 0, got {self.temperature}; use strategy 'greedy' for argmax"
            )
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 = off), got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1] (1 = off), got {self.top_p}")
        if not self.repetition_penalty > 0:
            raise ValueError(
                f"repetition_penalty must be > 0 (1 = off), got {self.repetition_penalty}"
            )
        if self.no_repeat_ngram_size < 0:
            raise ValueError(
                f"no_repeat_ngram_size must be >= 0 (0 = off), got {self.no_repeat_ngram_size}"
            )
        if self.num_beams < 1:
            raise ValueError(f"num_beams must be >= 1, got {self.num_beams}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.top_k_report < 1:
            raise ValueError(f"top_k_report must be >= 1, got {self.top_k_report}")
        return self

    def with_(self, **changes: Any) -> "DecodingOptions":
        """A validated copy with ``changes`` applied."""
        return replace(self, **changes).validate()

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON traces and settings."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DecodingOptions":
        """Build from a dict, ignoring unknown keys (settings from older versions)."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known).validate()
