"""``DecodingOptions(kv_cache=False)`` (``--no-kv-cache``): every step re-runs the decoder over
the whole prefix, as a decoder without a KV cache does, and gives the same ids as the cached run.
"""

from __future__ import annotations

import pytest
import torch

from core.backends.hf import HFSeq2SeqBackend
from core.engine import Engine
from core.events import Finished, StepEvent
from core.options import DecodingOptions

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class _Counting:
    """A backend that records how many positions each decoder call is fed."""

    def __init__(self, backend):
        self._backend, self.fed = backend, []

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def step(self, input_ids, cache, *args, **kw):
        self.fed.append(int(input_ids.shape[1]))
        return self._backend.step(input_ids, cache, *args, **kw)


def _run(backend, tiny, **changes):
    opts = DecodingOptions(strategy="greedy", max_new_tokens=8, top_k_report=3).with_(**changes)
    encoded = backend.encode(tiny.inputs)
    events = list(Engine(backend).run(encoded, tiny.prompt, opts))
    return [e for e in events if isinstance(e, StepEvent)], next(e for e in events if isinstance(e, Finished))


def test_without_the_cache_each_step_is_fed_the_whole_prefix(tiny_models):
    tiny = tiny_models["whisper"]
    prompt_len = len(tiny.prompt.prompt_ids)
    cached = _Counting(HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "w"))
    _, fin = _run(cached, tiny)
    off = _Counting(HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "w"))
    steps, fin_off = _run(off, tiny, kv_cache=False)
    n = len(steps)
    assert n >= 4
    assert cached.fed == [prompt_len] + [1] * (n - 1)  # the cache: one new token per step
    assert off.fed == [prompt_len + t for t in range(n)]  # no cache: the whole prefix every step
    assert fin_off.token_ids == fin.token_ids


@pytest.mark.parametrize("strategy,extra", [("beam", {"num_beams": 3}), ("sample", {"seed": 3, "temperature": 1.5}),
                                            ("contrastive", {"top_k": 3})])
def test_other_strategies_give_the_same_ids_without_the_cache(tiny_models, strategy, extra):
    tiny = tiny_models["whisper"]
    backend = HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "w")
    _, fin = _run(backend, tiny, strategy=strategy, **extra)
    _, fin_off = _run(backend, tiny, strategy=strategy, kv_cache=False, **extra)
    assert fin_off.token_ids == fin.token_ids


def test_the_generic_path_runs_without_the_cache(tiny_models):
    tiny = tiny_models["marian"]
    backend = _Counting(HFSeq2SeqBackend(tiny.model, tiny.tokenizer, "m"))
    _, fin = _run(backend, tiny)
    backend.fed.clear()
    _, fin_off = _run(backend, tiny, kv_cache=False)
    assert fin_off.token_ids == fin.token_ids
    assert backend.fed == list(range(1, len(backend.fed) + 1))


def test_speculative_decoding_refuses_to_run_without_the_cache():
    with pytest.raises(ValueError, match="kv_cache"):
        DecodingOptions(strategy="speculative", kv_cache=False).validate()


def test_tiny_en_greedy_gives_the_same_ids_without_the_cache(whisper_tiny_en):
    from core.inputs.audio import load_audio
    from tests.core.test_int8 import CLIP

    audio = load_audio(CLIP)
    opts = DecodingOptions(strategy="greedy", max_new_tokens=64)
    fin = [e for e in whisper_tiny_en.decode(audio, opts, language="en") if isinstance(e, Finished)][-1]
    fin_off = [e for e in whisper_tiny_en.decode(audio, opts.with_(kv_cache=False), language="en")
               if isinstance(e, Finished)][-1]
    assert len(fin.token_ids) > 10
    assert fin_off.token_ids == fin.token_ids


@pytest.mark.usefixtures("cli_reuses_models")
def test_the_cli_flag_gives_the_same_ids(capsys):
    import json

    from core.cli import main
    from tests.core.test_int8 import CLIP

    argv = ["transcribe", str(CLIP), "--model", "tiny.en", "--max-new-tokens", "12", "--json"]
    assert main(argv) == 0
    cached = json.loads(capsys.readouterr().out)
    assert main(argv + ["--no-kv-cache"]) == 0
    off = json.loads(capsys.readouterr().out)
    assert off["options"]["kv_cache"] is False and cached["options"]["kv_cache"] is True
    assert [t["id"] for t in off["tokens"]] == [t["id"] for t in cached["tokens"]]


def test_the_cli_refuses_speculative_without_the_cache(capsys):
    from core.cli import main
    from tests.core.test_int8 import CLIP

    with pytest.raises(SystemExit) as info:
        main(["transcribe", str(CLIP), "--model", "tiny.en", "--strategy", "speculative", "--no-kv-cache"])
    assert info.value.code == 2
    assert "--no-kv-cache" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["translate", "The children were playing happily in the garden."],
                                  ["translate", "The children were playing happily in the garden.", "--shortlist"]])
@pytest.mark.usefixtures("cli_reuses_models")
def test_the_bundled_translation_gives_the_same_ids_without_the_cache(capsys, argv):
    import json

    from core.cli import main

    ids = []
    for extra in ([], ["--no-kv-cache"]):
        assert main(argv + ["--json"] + extra) == 0
        ids.append([t["id"] for t in json.loads(capsys.readouterr().out)["tokens"]])
    assert len(ids[0]) > 3 and ids[1] == ids[0]
