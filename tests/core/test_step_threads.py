"""A Whisper decoder step on several threads (``core.backends.step_threads``): torch runs the
step's small operations on one thread, the output projection and the cross-attention are split
across threads, and the numbers are bit-identical to a one-thread step."""

from __future__ import annotations

import pathlib
import threading

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from core.backends import step_threads
from core.backends.step_threads import ALIGN, MAX_ROWS, StepThreads, column_edges, parallel

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def two_threads():
    """torch on two threads for the test, the count before restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_int8():
    from core.tasks.speech import SpeechModel

    return SpeechModel.load("tiny.en", dtype="int8")


class _Threads(TorchDispatchMode):
    """Records ``torch.get_num_threads()`` at every operation run on this thread."""

    def __init__(self):
        super().__init__()
        self.seen: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.add(torch.get_num_threads())
        return func(*args, **(kwargs or {}))


def _encoded(sm):
    from core.inputs.audio import load_audio
    from core.tasks.speech import SAMPLE_RATE

    audio = load_audio(sorted((ROOT / "assets" / "samples").glob("*.wav"))[0])
    feats = sm._loaded.feature_extractor(audio, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
    with torch.inference_mode():
        return sm.backend.encode({"input_features": feats})


def _steps(sm, encoded, threads: int, n: int = 6, mode: TorchDispatchMode | None = None):
    """Greedy ``n`` one-token steps at ``threads`` torch threads, capture and logit lens on:
    [(logits, cross-attention, lens)] and the thread count after."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        be = sm.backend
        prompt = list(sm.prompt("en", "transcribe").prompt_ids)
        got = []
        with torch.inference_mode():
            out = be.step(torch.tensor([prompt]), be.init_cache(encoded, 1), True)
            for _ in range(n):
                ids = torch.tensor([[int(out.logits[0].argmax())]])
                if mode is not None:
                    with mode:
                        out = be.step(ids, out.cache, True, capture_lens=True)
                else:
                    out = be.step(ids, out.cache, True, capture_lens=True)
                got.append((out.logits.clone(), out.cross_attention.clone(), out.lens_logits.clone()))
        return got, torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_a_two_thread_step_runs_torch_on_one_thread_and_equals_the_one_thread_step(dtype, request):
    """Before: every operation of a two-thread step ran with torch's two threads (an OpenMP
    parallel region in ~25 of them, 45 with int8), slower than one thread. Now torch sees one
    thread inside the step, two after it, and logits, cross-attention and logit lens are
    bit-identical to the one-thread step's."""
    sm = request.getfixturevalue("whisper_tiny_en" if dtype == "float32" else "tiny_int8")
    encoded = _encoded(sm)
    one, _ = _steps(sm, encoded, 1)
    mode = _Threads()
    two, after = _steps(sm, encoded, 2, mode=mode)
    assert mode.seen == {1}
    assert after == 2
    for (a1, c1, l1), (a2, c2, l2) in zip(one, two):
        assert torch.equal(a1, a2) and torch.equal(c1, c2) and torch.equal(l1, l2)


def test_the_encoder_and_the_cross_keys_keep_all_threads(whisper_tiny_en, two_threads):
    """Only the decoder step runs torch on one thread: the encoder pass and the cross-attention
    keys/values (init_cache) are matrix-matrix products and keep every thread."""
    be = whisper_tiny_en.backend
    mode = _Threads()
    with mode:
        encoded = _encoded(whisper_tiny_en)
        with torch.inference_mode():
            be.init_cache(encoded, 1)
    assert mode.seen == {2}


def test_split_layer_products_equal_the_one_thread_step(whisper_tiny_en, monkeypatch):
    """Products inside the layers (fc1, fc2, the fused q/k/v) split when their weights reach
    ``SPLIT_MIN_BYTES`` (bigger models than the bundled ones): forced here, bit-identical too."""
    import core.backends.whisper_lean as lean

    encoded = _encoded(whisper_tiny_en)
    one, _ = _steps(whisper_tiny_en, encoded, 1)
    widths = []

    def linear_parts(self, x, weight_t, bias, parts, _real=lean.WhisperLeanDecoder._linear_parts):
        widths.append(weight_t.shape[1])
        return _real(self, x, weight_t, bias, parts)

    monkeypatch.setattr(step_threads, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(lean.WhisperLeanDecoder, "_linear_parts", linear_parts)
    two, _ = _steps(whisper_tiny_en, encoded, 2)
    d = whisper_tiny_en._loaded.model.config.d_model
    ffn = whisper_tiny_en._loaded.model.config.decoder_ffn_dim
    assert {3 * d, ffn, d} <= set(widths)
    for (a1, c1, l1), (a2, c2, l2) in zip(one, two):
        assert torch.equal(a1, a2) and torch.equal(c1, c2) and torch.equal(l1, l2)


def test_the_head_and_the_cross_attention_are_split_across_the_threads(whisper_tiny_en, monkeypatch, two_threads):
    """A one-row step on two threads hands two parts to ``parallel`` for the output projection
    and for each layer's cross-attention (one row: a split head is the same numbers)."""
    import core.backends.whisper_lean as lean

    calls = []

    def counting(parts):
        calls.append(len(parts))
        return parallel(parts)

    monkeypatch.setattr(lean, "parallel", counting)
    encoded = _encoded(whisper_tiny_en)
    _steps(whisper_tiny_en, encoded, 2, n=1)
    layers = whisper_tiny_en._loaded.model.config.decoder_layers
    # the prompt step (4 rows): every layer's cross-attention and the head; the one-token step:
    # the same and the logit lens' head
    assert calls == [2] * (2 * layers + 3)


def test_a_step_over_many_rows_keeps_torchs_threads(two_threads):
    """A prompt, a re-fed prefix or the KV cache off feed many rows: matrix-matrix products
    that MKL splits itself; nothing changes for them."""
    with StepThreads(MAX_ROWS + 1) as parts:
        assert parts == 1 and torch.get_num_threads() == 2
    with StepThreads(1) as parts:
        assert parts == 2 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with StepThreads(1, cpu=False) as parts:  # a CUDA step: no worker threads
        assert parts == 1 and torch.get_num_threads() == 2
    with pytest.raises(RuntimeError):
        with StepThreads(1):
            raise RuntimeError("a failing step")
    assert torch.get_num_threads() == 2


def test_one_thread_changes_nothing():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with StepThreads(1) as parts:
            assert parts == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_parallel_returns_in_order_runs_workers_on_one_thread_and_reraises(two_threads):
    def where():
        return threading.current_thread().name, torch.get_num_threads(), torch.is_inference_mode_enabled()

    started = threading.Event()

    def first():  # waits until a worker runs the second part (the caller is busy here)
        assert started.wait(10)
        return where()

    def second():
        started.set()
        return where()

    with torch.inference_mode():
        got = parallel([first, second])
    assert got[0][0] == threading.current_thread().name
    assert got[1][0] in {t.name for t in step_threads._workers}
    assert got[1][1] == 1 and got[0][2] and got[1][2]
    # a part no worker has started yet is run by the caller: every part runs once
    ran = []
    assert parallel([lambda i=i: ran.append(i) or i for i in range(6)]) == list(range(6))
    assert sorted(ran) == list(range(6))
    assert [r for r in parallel([lambda i=i: i for i in range(4)])] == [0, 1, 2, 3]
    # the process-wide count new threads start with is the caller's, not the workers' 1
    seen = []
    t = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    t.start()
    t.join()
    assert seen == [2]

    finished = []

    def slow_ok():
        import time

        time.sleep(0.05)
        finished.append(True)

    def fails():
        raise ValueError("part failed")

    with pytest.raises(ValueError, match="part failed"):
        parallel([fails, slow_ok])
    assert finished == [True]  # the caller re-raises once every part is done


def test_column_edges_are_aligned_and_cover_the_columns():
    for n in (51865, 1536, 17, 0):
        for parts in (1, 2, 3, 4, 16):
            e = column_edges(n, parts)
            assert e[0] == 0 and e[-1] == n and len(e) == parts + 1
            assert e == sorted(e)
            assert all(x % ALIGN == 0 for x in e[1:-1])
    with pytest.raises(ValueError):
        column_edges(10, 0)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork on this platform")
def test_a_forked_child_starts_its_own_workers(two_threads):
    """The parent's worker threads do not exist in a forked child: the child starts its own
    (before, its list held the parent's dead threads, and each part handed to them stayed in
    the inbox, with the tensors it refers to, until the caller ran it itself)."""
    import os

    parallel([lambda: None, lambda: None])  # the parent has a worker
    pid = os.fork()
    if pid == 0:  # the child: exit 0 if parallel() runs both parts
        code = 1
        try:
            import signal

            signal.alarm(20)
            ran = []
            parallel([lambda: ran.append(0), lambda: ran.append(1)])
            alive = step_threads._workers and all(t.is_alive() for t in step_threads._workers)
            code = 0 if sorted(ran) == [0, 1] and alive else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_without_omp_set_num_threads_the_step_falls_back_to_torchs_setter(monkeypatch, two_threads):
    """Where the OpenMP runtime's ``omp_set_num_threads`` is not at hand, ``torch.set_num_threads``
    does the same for the step (process-wide as well), and the count is restored after."""
    monkeypatch.setattr(step_threads, "_thread_setter", None)
    with StepThreads(1) as parts:
        assert parts == 2 and torch.get_num_threads() == 1
        assert parallel([lambda: torch.get_num_threads(), lambda: 7])[1] == 7
    assert torch.get_num_threads() == 2


def test_the_step_changes_only_its_own_threads_count(two_threads):
    """With ``omp_set_num_threads`` (Linux builds of torch): a thread started inside a step gets the
    process's count, not the step's 1."""
    if step_threads._find_thread_setter() is None:
        pytest.skip("this torch build's OpenMP runtime has no omp_set_num_threads in the global symbols")
    seen = []
    with StepThreads(1):
        t = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        t.start()
        t.join()
        assert torch.get_num_threads() == 1
    assert seen == [2]
