"""Whisper's first decoder step on <|startoftranscript|>: which language a window speaks, and
whether it holds speech at all (openai/whisper ``decoding.py``: ``detect_language``,
``no_speech_probs``). One step per window, cached by the window's key.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from core.catalog import WHISPER_TASKS


class StartOfTranscript:
    """The <|startoftranscript|> step of one loaded Whisper model, cached per window.

    Args:
        loaded: the loaded checkpoint (``core.backends.whisper_models``: ``special``,
            ``lang_token_ids``, ``multilingual``, ``languages``).
        backend: its ``HFSeq2SeqBackend`` (``init_cache``, ``step``).
        name: the model's display name (for messages).

    Attributes:
        cache: window key -> (float32 logits of the language tokens (n_languages,),
            no-speech probability or None).
        index: language code -> its position in ``languages``.
    """

    def __init__(self, loaded, backend, name: str):
        self.loaded, self.backend, self.name = loaded, backend, name
        self.multilingual = bool(loaded.multilingual)
        self.languages = list(loaded.languages)
        self.index = {c: i for i, c in enumerate(self.languages)}
        self.cache: dict = {}

    def candidates(self, candidate_languages: Sequence[str] | str | None) -> tuple[str, ...] | None:
        """The checked candidate languages (deduplicated, in the order given), or None for
        "all": None, an empty sequence/string, and any value on an English-only model (it
        has no language choice, so the restriction does not apply).

        Raises:
            ValueError: a code the model does not know (the message lists the valid ones).
        """
        if candidate_languages is None or not self.multilingual:
            return None
        if isinstance(candidate_languages, str):
            candidate_languages = candidate_languages.replace(",", " ").split()
        codes = tuple(dict.fromkeys(str(c).strip().lower() for c in candidate_languages if str(c).strip()))
        unknown = [c for c in codes if c not in self.loaded.lang_token_ids]
        if unknown:
            raise ValueError(f"unknown candidate language(s) {', '.join(map(repr, unknown))}; "
                             f"use codes {self.name} knows: {', '.join(self.languages)}")
        return codes or None

    def step(self, encoded, key=None, candidates: tuple[str, ...] | None = None
             ) -> tuple[str | None, float, float | None]:
        """(detected language or None, its probability, no-speech probability) from one
        decoder step on <|startoftranscript|>; the language among ``candidates`` (checked
        codes, :meth:`candidates`) when given. Cached by the window's key."""
        probs = self.distribution(encoded, key, candidates)
        language, p = next(iter(probs.items())) if probs else (None, 0.0)
        return language, p, self.logits(encoded, key)[1]

    def distribution(self, encoded, key=None, candidates: tuple[str, ...] | None = None) -> dict[str, float]:
        """code -> probability, best first (ties in token order): the softmax over the
        language-token logits of ``candidates`` (all languages when None); {} English-only."""
        import torch

        if not self.multilingual:
            return {}
        logits = self.logits(encoded, key)[0]
        codes = list(candidates) if candidates else self.languages
        idx = [self.index[c] for c in codes]
        probs = torch.softmax(torch.from_numpy(logits[idx]), dim=-1).tolist()
        return dict(sorted(zip(codes, probs), key=lambda kv: -kv[1]))

    def logits(self, encoded, key=None) -> tuple[np.ndarray, float | None]:
        """(float32 logits of the language tokens in ``self.languages`` order, shape
        (n_languages,) — (0,) for English-only models; no-speech probability or None) of
        one decoder step on <|startoftranscript|>; cached by the window's key."""
        if key is not None and key in self.cache:
            return self.cache[key]
        import torch

        lw = self.loaded
        cache = self.backend.init_cache(encoded, 1)
        out = self.backend.step(torch.tensor([[lw.special.sot]]), cache, output_attentions=False)
        logits = out.logits[0].float()
        lang = np.zeros(0, np.float32)
        if self.multilingual:
            ids = torch.tensor([lw.lang_token_ids[c] for c in self.languages])
            lang = logits[ids].detach().cpu().numpy().astype(np.float32, copy=True)
        ns = lw.special.no_speech
        no_speech = float(torch.softmax(logits, dim=-1)[ns]) if ns is not None else None
        result = (lang, no_speech)
        if key is not None:
            self.cache[key] = result
        return result

    def check(self, language: str, task: str, candidate_languages: Sequence[str] | None = None) -> None:
        """Raise ValueError for a language ("auto" or a code) or task ("transcribe",
        "translate") the model cannot do, or an unknown candidate language (:meth:`candidates`);
        the message says what to choose instead."""
        self.candidates(candidate_languages)
        if task not in WHISPER_TASKS:
            raise ValueError(f"task must be 'transcribe' or 'translate', got {task!r}")
        if not self.multilingual:
            if task != "transcribe":
                raise ValueError(f"{self.name} is English-only and cannot translate; choose model 'base' for translate")
            if language not in ("auto", "en"):
                raise ValueError(f"{self.name} is English-only; choose language 'en' or model 'base' for {language!r}")
        elif language != "auto" and language not in self.languages:
            raise ValueError(
                f"unknown language {language!r}; use 'auto' or one of: {', '.join(self.languages[:20])}, ..."
            )
