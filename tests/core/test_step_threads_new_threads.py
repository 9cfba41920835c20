"""R1 review of 3226a17 (core.backends.step_threads): a thread whose first torch call falls while
another thread is inside ``StepThreads`` must still get the process's thread count.

torch's per-thread OpenMP count is set lazily, at a thread's first torch call, from the
process-wide count that ``torch.set_num_threads`` also sets; ``StepThreads.__enter__`` sets it
to 1 for the length of the step. The GUI starts a new QThread per run and aborts the old one
without waiting (``RunController.start``: a slider move), so the re-decode's first torch call
usually falls inside the old run's last step, and that run then decodes on one thread: its
encoder and prompt on one thread, its steps unsplit (``StepThreads`` sees 1 thread).
Proof script: /work/notes/s12/r1/new_run_thread_at_one.py (gui.worker.start_worker)."""

from __future__ import annotations

import threading

import torch

from core.backends.step_threads import StepThreads

from .test_step_threads import two_threads  # noqa: F401  (the fixture: torch on two threads, restored after)


def test_a_thread_whose_first_torch_call_falls_inside_another_threads_step_gets_the_process_count(two_threads):
    inside, release = threading.Event(), threading.Event()

    def decode():  # a run whose step is running (the old run of a slider move)
        with StepThreads(1):
            inside.set()
            release.wait(5)

    old = threading.Thread(target=decode)
    old.start()
    assert inside.wait(5)
    seen = []
    new = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))  # the re-decode's thread
    new.start()
    new.join()
    release.set()
    old.join()
    assert seen == [2]


def test_a_late_worker_start_up_does_not_leave_the_process_at_one_thread(monkeypatch):
    """``_ensure_workers`` waits for a hand-shake on the shared inbox, which an idle older worker
    may answer; the new worker's ``torch.set_num_threads(1)`` (which also sets the process-wide
    count) then runs whenever the scheduler gets to it, possibly after the step. The scheduler's
    delay is simulated (50 ms before the new workers' first torch call)."""
    import time
    import types

    from core.backends import step_threads as st

    real = torch
    known = {t.name for t in st._workers}
    late = threading.local()

    class LateStart(types.ModuleType):
        def __getattr__(self, name):
            return getattr(real, name)

        def get_num_threads(self):
            name = threading.current_thread().name
            if name.startswith("decoder-step-") and name not in known and not getattr(late, "done", False):
                late.done = True
                time.sleep(0.05)
            return real.get_num_threads()

    before = real.get_num_threads()
    threads = len(st._workers) + 3  # two or more new workers beside an older (or the first) one
    monkeypatch.setattr(st, "torch", LateStart("torch"))
    real.set_num_threads(threads)
    try:
        with st.StepThreads(1) as parts:
            st.parallel([lambda: None] * parts)
        time.sleep(0.3)  # every new worker has started by now
        seen = []
        t = threading.Thread(target=lambda: seen.append(real.get_num_threads()))
        t.start()
        t.join()
        assert seen == [threads]
    finally:
        real.set_num_threads(before)


def test_split_min_bytes_zero_leaves_an_int8_models_layers_alone(monkeypatch, two_threads):
    """``SPLIT_MIN_BYTES`` 0 ("splits every one") must split the float products only: an int8
    model's fc1/fc2 are ``Int8Linear`` (``_ffn_bytes`` 0, "not split"); 0 >= 0 took the float
    split, which read ``Int8Linear.weight`` (AttributeError). R1 review of f79e409."""
    from core.backends import step_threads
    from core.tasks.speech import SpeechModel

    sm = SpeechModel.load("tiny.en", dtype="int8")
    be = sm.backend
    prompt = list(sm.prompt("en", "transcribe").prompt_ids)
    encoded = be.encode({"input_features": torch.zeros(1, 80, 3000)})
    monkeypatch.setattr(step_threads, "SPLIT_MIN_BYTES", 0)
    with torch.inference_mode():
        out = be.step(torch.tensor([prompt]), be.init_cache(encoded, 1), True)
        out = be.step(torch.tensor([[int(out.logits[0].argmax())]]), out.cache, True)
    assert out.logits.shape[-1] == sm._loaded.model.config.vocab_size
