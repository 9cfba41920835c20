"""torch's shared libraries load ahead of time with the GIL released (issue 22: the first model
load's ``import torch`` held the GIL in one ``dlopen`` for 400-800 ms, the window stalled), and
the model load's worker does that before it loads (and imports torch)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gui import preload

from .fakes import FakeSpeechModel
from .tab_helpers import speech_tab

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, **env) -> subprocess.CompletedProcess:
    import os

    # the child starts from this process's environment less LD_LIBRARY_PATH (which cv2's import
    # sets in-process when an OCR test ran first) unless the test names it
    base = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**base, **env})


@pytest.mark.skipif(not sys.platform.startswith("linux") or preload.torch_library_dir() is None,
                    reason="the preload is for Linux with torch installed")
def test_the_preload_maps_libtorch_without_importing_torch_and_torch_imports_after_it():
    out = _run("""
        import sys
        from gui import preload
        assert preload.load_libraries() == ["libtorch_global_deps.so", "libtorch.so"], preload.errors()
        assert "torch" not in sys.modules, "the preload imported torch"
        maps = open("/proc/self/maps").read()
        print("mapped", "libtorch_cpu.so" in maps, preload.loaded(), preload.errors())
        import torch
        print("sum", float(torch.arange(4.0).sum()))
    """)
    assert out.returncode == 0, out.stderr
    assert "mapped True" in out.stdout and "libtorch.so" in out.stdout
    assert "sum 6.0" in out.stdout


def test_the_preload_goes_through_a_ctypes_function_call_which_releases_the_gil():
    fn = preload._dlopen()
    # a function of a ctypes.CDLL (not PyDLL): ctypes releases the GIL around the call
    assert not (fn._flags_ & ctypes_flag("FUNCFLAG_PYTHONAPI"))


def ctypes_flag(name: str) -> int:
    import _ctypes

    return getattr(_ctypes, name)


def test_turned_off_by_the_environment():
    out = _run("""
        import sys
        from gui import preload
        print(preload.enabled(), preload.load_libraries(), "torch" in sys.modules)
    """, DECODING_EXPLORER_NO_PRELOAD="1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "[]", "False"]


@pytest.fixture
def tab(qtbot):
    yield from speech_tab(qtbot, None)


def test_a_model_load_loads_torchs_libraries_in_its_worker_before_the_model(qtbot, tab, monkeypatch):
    import threading

    order = []
    monkeypatch.setattr(preload, "load_libraries", lambda: order.append(("libraries", threading.get_ident())) or [])
    monkeypatch.setattr(tab, "load_model_object",
                        lambda name, progress: order.append(("model", threading.get_ident())) or FakeSpeechModel())
    tab.load_model("tiny.en")
    qtbot.waitUntil(lambda: tab.model is not None and not tab.is_loading(), timeout=5000)
    assert [what for what, _t in order] == ["libraries", "model"]
    assert order[0][1] == order[1][1] != threading.get_ident()  # in the loader's thread, not the GUI thread


@pytest.fixture
def gc_policy_on():
    from gui import gc_policy

    gc_policy.install()
    yield gc_policy
    gc_policy.uninstall()


def test_the_garbage_collector_is_paused_while_a_model_loads_and_back_on_after(qtbot, tab, monkeypatch, gc_policy_on):
    import gc

    during = []
    monkeypatch.setattr(preload, "load_libraries", lambda: [])
    monkeypatch.setattr(tab, "load_model_object", lambda name, progress: during.append(gc.isenabled()) or FakeSpeechModel())
    assert gc.isenabled()
    tab.load_model("tiny.en")
    qtbot.waitUntil(lambda: tab.model is not None and not tab.is_loading(), timeout=5000)
    assert during == [False]  # no collection with the GIL held in the middle of the load
    assert gc.isenabled()


def test_what_a_load_made_is_frozen_in_the_loaders_thread_not_walked_on_the_gui_thread(qtbot, tab, monkeypatch,
                                                                                       gc_policy_on):
    import gc
    import threading

    class Node:
        pass

    frozen_in = []
    real_freeze = gc.freeze

    def freeze():
        frozen_in.append(threading.get_ident())
        real_freeze()

    def load(name, progress):
        model = FakeSpeechModel()
        model.parts = [Node() for _ in range(5000)]  # what a load makes
        return model

    monkeypatch.setattr(gc, "freeze", freeze)
    monkeypatch.setattr(preload, "load_libraries", lambda: [])
    monkeypatch.setattr(tab, "load_model_object", load)
    tab.load_model("tiny.en")
    qtbot.waitUntil(lambda: tab.model is not None and not tab.is_loading(), timeout=5000)
    assert any(t != threading.get_ident() for t in frozen_in)  # the loader froze them
    assert not gc.is_tracked(tab.model.parts[0]) or not any(o is tab.model.parts[0] for o in gc.get_objects())


def test_without_the_gc_policy_a_load_leaves_the_collector_alone(qtbot, tab, monkeypatch):
    import gc

    during = []
    monkeypatch.setattr(preload, "load_libraries", lambda: [])
    monkeypatch.setattr(tab, "load_model_object", lambda name, progress: during.append(gc.isenabled()) or FakeSpeechModel())
    tab.load_model("tiny.en")
    qtbot.waitUntil(lambda: tab.model is not None and not tab.is_loading(), timeout=5000)
    assert during == [True]


def test_a_failed_load_turns_the_garbage_collector_back_on(qtbot, tab, monkeypatch, gc_policy_on):
    import gc

    def boom(name, progress):
        raise FileNotFoundError("no model here")

    monkeypatch.setattr(preload, "load_libraries", lambda: [])
    monkeypatch.setattr(tab, "load_model_object", boom)
    with qtbot.waitSignal(tab.errorOccurred, timeout=5000):
        tab.load_model("nonsense")
    qtbot.waitUntil(lambda: not tab.is_loading(), timeout=5000)
    assert gc.isenabled()


@pytest.mark.skipif(preload.torch_library_dir() is None
                    or not (Path(preload.torch_library_dir()) / "libtorch_cuda.so").exists(),
                    reason="a CUDA build of torch only")
def test_a_cuda_build_with_ld_library_path_is_left_to_torchs_import():
    out = _run("""
        import sys
        from gui import preload
        print(preload.load_libraries(), "torch" in sys.modules, bool(preload.errors()))
        import torch
        print("sum", float(torch.arange(4.0).sum()))
    """, LD_LIBRARY_PATH="/nonexistent")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].split() == ["[]", "False", "True"]
    assert "sum 6.0" in out.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux") or preload.torch_library_dir() is None,
                    reason="the preload is for Linux with torch installed")
def test_after_the_preload_torchs_import_dlopens_nothing_new_with_the_gil_held():
    # a CUDA build's import of torch dlopens its wheels' libraries through ctypes.CDLL (the GIL
    # held): libnvrtc-builtins and libcusolver are not among libtorch's dependencies, and read
    # from disk (out of the page cache) the first took 78 ms; torch._C's own dependency
    # libtorch_python (34 MB) is dlopened by the import system, the GIL held as well
    out = _run("""
        import ctypes, os, sys
        from gui import preload
        preload.load_libraries()
        maps = {os.path.basename(line.split()[-1]) for line in open("/proc/self/maps") if "/" in line}
        opened = []
        init = ctypes.CDLL.__init__
        def record(self, name, *args, **kwargs):
            opened.append(os.path.basename(name or ""))
            init(self, name, *args, **kwargs)
        ctypes.CDLL.__init__ = record
        import torch
        print("new", sorted({n for n in opened if n and n not in maps}))
        print("libtorch_python", "libtorch_python.so" in maps)
    """)
    assert out.returncode == 0, out.stderr
    assert "new []" in out.stdout, out.stdout
    assert "libtorch_python True" in out.stdout, out.stdout
