"""End to end: contrastive decoding through the CLI on the bundled clip and whisper-base.

``--contrastive-amateur layer:L`` / ``layer:auto`` (DoLa) must give the tokens of a reference
greedy loop written beside the app: the backend's step with its logit lens, the task's hard
rules, and DoLa as transformers 4.45 wrote it (tests/helpers/contrastive_reference.py).
``--contrastive-amateur tiny.en`` must give the tokens of a greedy loop that scores each step
with x-transformers' ``contrastive_decode_fn`` on base's logits (with the hard rules) and
tiny.en's, mapped into base's vocabulary by the task's companion (the id mapping the draft uses).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from core.cli import main
from core.options import DecodingOptions
from tests.helpers.contrastive_reference import dola_reference

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("cli_reuses_models")]  # the CLI gets the session's base

CLIP = Path(__file__).resolve().parents[2] / "assets" / "samples" / "speech_en.wav"


def _trace(capsys, *argv) -> dict:
    code = main(["transcribe", str(CLIP), "--model", "base", "--json", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


@pytest.fixture(scope="module")
def window(whisper_base):
    """The clip's one window as the CLI decodes it: (engine, encoder output, prompt, hard rules)."""
    from core.inputs.audio import load_audio
    from core.inputs.types import SpeechInput

    audio = load_audio(str(CLIP))
    options = DecodingOptions()
    plan = whisper_base.plan(SpeechInput(audio=audio, language="auto", task="transcribe", timestamps=False), options)
    assert len(plan.segments) == 1
    prepared = plan.prepare(0, plan.segments[0])
    rules, _ = plan.engine.processors(prepared.encoded, prepared.prompt, options)
    return plan.engine, prepared.encoded, prepared.prompt, rules


_PLAIN: dict[int, list[int]] = {}


def _plain(window) -> list[int]:
    """Plain greedy's tokens (the reference without an amateur), computed once."""
    if id(window) not in _PLAIN:
        _PLAIN[id(window)] = _reference(window, None)
    return _PLAIN[id(window)]


def _reference(window, layers: list[int] | None, alpha: float = 0.1) -> list[int]:
    """Greedy decoding, each step's scores = DoLa of (the logits with the hard rules) against
    the lens of ``layers`` (candidates; None = plain greedy), chosen on the raw logits."""
    def dola(ids, expert, out):
        if layers is None:
            return expert
        lens = out.lens_logits[0]  # (decoder layers, vocab); the last is the model's logits
        premature = {i + 1: lens[i][None] for i in range(lens.shape[0] - 1)}
        return dola_reference(layers, premature, expert, relative_top=alpha, mature=out.logits)

    return _reference_fn(window, dola)


@torch.no_grad()
def _reference_fn(window, score, max_new: int = 100) -> list[int]:
    """Greedy decoding of the window with each step's scores = ``score(ids, expert, out)``:
    ``expert`` float32 (1, vocab) the logits with the hard rules, ``out`` the step's output."""
    engine, encoded, prompt, rules = window
    backend = engine.backend
    ids = list(prompt.prompt_ids)
    cache = backend.init_cache(encoded, 1)
    out = backend.step(torch.tensor([ids]), cache, False, capture_lens=True)
    generated = []
    for _ in range(max_new):
        expert = rules(torch.tensor([ids]), out.logits)
        scores = score(ids, expert, out)
        token = int(scores.argmax())
        if token == prompt.eos_token_id:
            break
        generated.append(token)
        ids.append(token)
        out = backend.step(torch.tensor([[token]]), out.cache, False, capture_lens=True)
    return generated


@pytest.mark.parametrize("amateur,layers", [("layer:2", [2]), ("layer:5", [5]), ("layer:auto", [1, 2, 3, 4, 5])])
def test_dola_through_the_cli_equals_the_reference(capsys, window, amateur, layers):
    trace = _trace(capsys, "--contrastive-amateur", amateur)
    ids = [t["id"] for t in trace["tokens"]]
    assert ids == _reference(window, layers)
    assert ids != _plain(window)  # the contrast changed the transcript
    assert "speech recognition" in trace["text"]
    assert trace["options"]["contrastive_amateur"] == amateur
    assert all(t["stages"][0]["name"] == "contrastive_decoding" for t in trace["tokens"])


@pytest.mark.parametrize("alpha,beta", [(0.1, 0.5), (0.05, 1.0)])
def test_a_tiny_en_amateur_through_the_cli_equals_x_transformers(capsys, whisper_base, window, alpha, beta):
    import x_transformers.autoregressive_wrapper as x_transformers  # the test extra (pyproject)

    from core.inputs.audio import load_audio
    from core.inputs.types import SpeechInput
    from core.tasks.base import CompanionEngine

    trace = _trace(capsys, "--contrastive-amateur", "tiny.en", "--cd-alpha", str(alpha), "--cd-beta", str(beta))
    # the reference: the same window, tiny.en as the task builds it (its own encoder output and prompt)
    inp = SpeechInput(audio=load_audio(str(CLIP)), language="auto", task="transcribe", timestamps=False)
    plan = whisper_base.plan(inp, DecodingOptions())
    engine = CompanionEngine(whisper_base, inp, plan)
    ready = engine.prepare(0, plan.segments[0])
    companion = engine.companion("tiny.en", ready.encoded, ready.prompt)
    _, encoded, prompt, rules = window

    def contrast(ids, expert, out):
        amateur = companion.logits(ids, 1)[-1:]
        # ids tiny.en has no single piece for are left uncontrasted (the stage's documented deviation):
        # the amateur's log-probability there := the expert's
        unknown = torch.isneginf(amateur)
        amateur = torch.where(unknown, expert - expert.logsumexp(-1, keepdim=True) + amateur.logsumexp(-1, keepdim=True),
                              amateur)
        return x_transformers.contrastive_decode_fn(expert, amateur, alpha=alpha, beta=beta)

    want = _reference_fn(window, contrast)
    assert [t["id"] for t in trace["tokens"]] == want
    assert all(t["stages"][0]["name"] == "contrastive_decoding" for t in trace["tokens"])
    assert "speech recognition" in trace["text"]
    if (alpha, beta) == (0.1, 0.5):
        assert want != _plain(window)  # tiny.en changed base's transcript


def test_the_plausibility_cut_and_alpha_flag(capsys, window):
    """--cd-alpha 1 keeps only the expert's best token: DoLa then changes nothing."""
    trace = _trace(capsys, "--contrastive-amateur", "layer:auto", "--cd-alpha", "1")
    assert [t["id"] for t in trace["tokens"]] == _plain(window)
    assert all(t["stages"][0]["kept"] == 1 for t in trace["tokens"])
    assert trace["options"]["cd_alpha"] == 1.0


def test_a_bad_amateur_is_one_line_that_says_what_to_write(capsys):
    code = main(["transcribe", str(CLIP), "--model", "base", "--contrastive-amateur", "layer:9"])
    _, err = capsys.readouterr()
    assert code != 0 and "give 1 … 5" in err and "Traceback" not in err


def test_the_json_trace_says_which_layer_and_what_the_amateur_gave(capsys):
    trace = _trace(capsys, "--contrastive-amateur", "layer:auto")
    for tok in trace["tokens"]:
        stage = tok["stages"][0]
        assert stage["note"].startswith("amateur layer ") and " of 6 (auto, JS " in stage["note"]
        assert 0.0 <= stage["amateur_prob"] <= 1.0
