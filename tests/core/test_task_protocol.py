"""The Task protocol (issue 20 §4): the three tasks' runs are written once, over a plan, and
their inputs are dataclasses that carry the input and its settings. No model is loaded here."""

from __future__ import annotations

import numpy as np
import pytest

from core.inputs.types import ImageInput, SpeechInput, TextInput
from core.tasks.base import SegmentedTask, Task

RUNS = ("decode", "decode_lanes", "fork", "what_if", "no_input")


def _tasks():
    from core.tasks.ocr import OCRModel
    from core.tasks.speech import SpeechModel
    from core.tasks.translation import TranslationModel

    return [(SpeechModel, SpeechInput), (OCRModel, ImageInput), (TranslationModel, TextInput)]


@pytest.mark.parametrize("run", RUNS)
def test_every_task_runs_the_base_s_one_copy(run):
    """decode, lanes, fork, what-if and no-input exist once, in SegmentedTask; each task gives
    only its input type and its plan / masked / emptied."""
    for cls, input_type in _tasks():
        assert getattr(cls, run) is getattr(SegmentedTask, run), f"{cls.__name__}.{run} is written again"
        assert cls.input_type is input_type
        for hook in ("plan", "masked", "emptied"):
            assert getattr(cls, hook) is not getattr(SegmentedTask, hook), f"{cls.__name__} lacks {hook}"
        for name in (*RUNS, "prefix_ids"):
            assert callable(getattr(cls, name, None)), f"{cls.__name__} does not satisfy Task: no {name}"


def test_the_protocol_names_the_runs_the_gui_calls():
    for name in (*RUNS, "prefix_ids"):
        assert callable(getattr(Task, name))


def test_settings_are_checked_by_name():
    audio = np.zeros(16000, np.float32)
    inp = SpeechInput.of(audio, {"language": "de", "timestamps": True})
    assert inp.language == "de" and inp.timestamps and inp.task == "transcribe"
    with pytest.raises(TypeError, match="unexpected keyword argument 'shortlist'"):
        SpeechInput.of(audio, {"shortlist": True})
    with pytest.raises(TypeError, match="decode\\(\\) got an unexpected keyword argument 'longform'"):
        SpeechInput.of(audio, {"longform": True}, method="decode")
    assert SpeechInput.of(audio, {"longform": True}, method="fork").longform


def test_call_args_give_the_settings_a_task_method_takes():
    """Always-passed settings and those off their defaults, as the tabs passed them by hand."""
    audio = np.zeros(16000, np.float32)
    source, settings = SpeechInput(audio, "en", "transcribe", candidate_languages=("en", "de"),
                                   longform=True).call_args(rerun=False)
    assert source is audio and settings == {"language": "en", "task": "transcribe", "candidate_languages": ("en", "de")}
    assert SpeechInput(audio, longform=True).call_args()[1]["longform"] is True
    assert TextInput("Hi.").call_args() == ("Hi.", {"shortlist": False})
    assert ImageInput("img", region=(1, 2, 3, 4)).call_args() == ("img", {"region": (1, 2, 3, 4)})
    assert (SpeechInput.mask_keyword, ImageInput.mask_keyword, TextInput.mask_keyword) == ("span", "mask", "drop")


def test_identities_name_the_input_and_hash_its_content():
    from PIL import Image

    audio = np.zeros(32000, np.float32)
    desc, digest = SpeechInput(audio).identity("clip.wav")
    assert desc == "clip.wav (2.00 s audio)" and len(digest) == 64
    assert SpeechInput(audio + 0.5).identity("clip.wav")[1] != digest
    desc, _ = TextInput("The weather is nice today and the sun shines on the hills.").identity()
    assert desc == "the text 'The weather is nice today and the sun s…' (58 characters)"
    img = Image.new("RGB", (40, 20), "white")
    whole, region = ImageInput(img).identity("a.png"), ImageInput(img, region=(1, 2, 10, 5)).identity("a.png")
    assert whole[0] == "a.png (40×20 px)" and region[0] == "a.png (40×20 px, region 10×5 px at (1, 2))"
    assert whole[1] != region[1]


def test_what_if_needs_its_mask():
    from core.tasks.speech import SpeechModel

    model = SpeechModel.__new__(SpeechModel)  # no weights: the mask is checked before any plan
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'span'"):
        next(model.what_if(np.zeros(16000, np.float32), None, []))
