"""How close a decoded text is to a reference text, with well-kept libraries.

One metric per task, the one its field reports:

- speech (``transcribe``): word error rate, jiwer (``jiwer.wer``), both texts lower-cased,
  punctuation removed and white space collapsed first (Whisper writes punctuation and
  capitals that a typed reference may lack; openai/whisper's evaluations normalise too).
  A fraction: 0 = every word right, 1 = as many errors as reference words (can exceed 1).
- OCR (``ocr``): character error rate, jiwer (``jiwer.cer``), white space collapsed and
  stripped only (case and punctuation are part of what a reader must get right).
- translation (``translate``): chrF, sacrebleu (``sacrebleu.metrics.CHRF``, its defaults:
  character 6-grams, beta 2), 0..100, higher is better. The whole text is one segment.

:func:`score` is what the CLI's ``--reference`` and the GUI's reference box show. Both
libraries are imported when first used (the GUI imports this module at start).

WER's text normaliser (``normaliser=``): "basic" (the default: lower case, no punctuation,
single spaces) or "whisper-en", openai/whisper's ``EnglishTextNormalizer`` (the one its English
WER figures use: British -> American spellings from its ``english.json`` map, "harbour" ->
"harbor"; spelled-out numbers -> digits; contractions expanded; "hmm"/"uh" fillers and
bracketed text dropped), from the ``whisper-normalizer`` package (a copy of openai/whisper's
``normalizers``, with the spelling map; transformers ships the class but not the map, which
comes with a checkpoint's ``normalizer.json``, and the bundled models have none). Apply the
same normaliser to every transcript compared (streamed, offline, reference).
"""

from __future__ import annotations

from dataclasses import dataclass

#: the metric of each task (the CLI's command names)
TASK_METRICS = {"transcribe": "wer", "ocr": "cer", "translate": "chrf"}
#: metric -> (display name, higher is better)
METRICS = {"wer": ("WER", False), "cer": ("CER", False), "chrf": ("chrF", True)}
#: WER's text normalisers (see the module docstring)
NORMALISERS = ("basic", "whisper-en")


@dataclass(frozen=True)
class Score:
    """One text scored against a reference.

    Attributes:
        name: "wer" | "cer" | "chrf".
        value: WER/CER as a fraction (0 = perfect), chrF 0..100 (100 = perfect).
    """

    name: str
    value: float

    @property
    def label(self) -> str:
        """The metric's display name ("WER", "CER", "chrF")."""
        return METRICS[self.name][0]

    @property
    def higher_is_better(self) -> bool:
        return METRICS[self.name][1]

    def text(self) -> str:
        """For people: "WER 12.5%", "CER 3.1%", "chrF 71.2"."""
        if self.name == "chrf":
            return f"{self.label} {self.value:.1f}"
        return f"{self.label} {100 * self.value:.1f}%"

    def to_dict(self) -> dict:
        return {"name": self.name, "value": round(self.value, 6)}


def metric_for(task: str) -> str:
    """The metric name of a task ("transcribe" / "speech", "ocr", "translate" / "translation").

    Raises:
        ValueError: an unknown task.
    """
    aliases = {"speech": "transcribe", "translation": "translate"}
    name = TASK_METRICS.get(aliases.get(task, task))
    if name is None:
        raise ValueError(f"no reference metric for task {task!r}; use one of {', '.join(TASK_METRICS)}")
    return name


def _wer_transform():
    import jiwer

    return jiwer.Compose([
        jiwer.ToLowerCase(), jiwer.RemovePunctuation(), jiwer.RemoveMultipleSpaces(), jiwer.Strip(),
        jiwer.ReduceToListOfListOfWords(),
    ])


def _cer_transform():
    import jiwer

    return jiwer.Compose([jiwer.RemoveMultipleSpaces(), jiwer.Strip(), jiwer.ReduceToListOfListOfChars()])


_english = None


def _whisper_english(text: str) -> str:
    """openai/whisper's EnglishTextNormalizer (one instance, built when first used: it reads
    the 1,700-entry spelling map)."""
    global _english
    if _english is None:
        from whisper_normalizer.english import EnglishTextNormalizer

        _english = EnglishTextNormalizer()
    return _english(text)


def _check_normaliser(metric: str, normaliser: str) -> None:
    if normaliser not in NORMALISERS:
        raise ValueError(f"unknown text normaliser {normaliser!r}; use one of {', '.join(NORMALISERS)}")
    if normaliser != "basic" and metric != "wer":
        raise ValueError(f"the {normaliser!r} normaliser is for wer (English words), not {metric!r}")


def normalise(metric: str, text: str, normaliser: str = "basic") -> str:
    """``text`` as the metric compares it (WER: lower case, no punctuation, single spaces,
    after Whisper's English normaliser with ``normaliser="whisper-en"``; CER: single spaces,
    stripped; chrF: unchanged).

    Raises:
        ValueError: an unknown normaliser, or "whisper-en" for a metric other than wer.
    """
    import jiwer

    _check_normaliser(metric, normaliser)
    if metric == "wer":
        if normaliser == "whisper-en":
            text = _whisper_english(text)
        return " ".join(w for words in _wer_transform()(text) for w in words)
    if metric == "cer":
        return jiwer.Compose([jiwer.RemoveMultipleSpaces(), jiwer.Strip()])(text)
    return text


def score(metric: str, hypothesis: str, reference: str, normaliser: str = "basic") -> Score:
    """Score ``hypothesis`` against ``reference`` with ``metric`` (see the module docstring);
    ``normaliser`` ("basic" | "whisper-en", WER only) is applied to both texts.

    Raises:
        ValueError: an unknown metric or normaliser, or a reference with nothing to compare
            against (empty after normalisation).
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
    _check_normaliser(metric, normaliser)
    if normaliser == "whisper-en":
        hypothesis, reference = _whisper_english(hypothesis), _whisper_english(reference)
    if not normalise(metric, reference).strip():
        raise ValueError("the reference text is empty (or only punctuation); type or load the text you expected")
    if metric == "chrf":
        from sacrebleu.metrics import CHRF

        return Score("chrf", float(CHRF().sentence_score(hypothesis, [reference]).score))
    import jiwer

    if metric == "wer":
        t = _wer_transform()
        return Score("wer", float(jiwer.wer(reference, hypothesis, reference_transform=t, hypothesis_transform=t)))
    t = _cer_transform()
    return Score("cer", float(jiwer.cer(reference, hypothesis, reference_transform=t, hypothesis_transform=t)))
