"""``decoding-explorer sweep`` without Ray: the data readers, seed ranges, the result store,
the statistics against hand-computed values, and the one-line message without Ray."""

from __future__ import annotations

import sys

import pytest

from core.options import DecodingOptions


# ---------------------------------------------------------------- statistics
def _row(file, spec, value, seed=0, **kw):
    return {"file": file, "spec": spec, "seed": seed, "metric": kw.pop("metric", "wer"), "value": value,
            "text": kw.pop("text", "x"), "logprob": -1.0, "tokens": 3, "decode_s": 0.1, "rtf": None,
            "no_speech": kw.pop("no_speech", 0), "fallbacks": kw.pop("fallbacks", 0),
            "repetitions": kw.pop("repetitions", 0), "silent_reference": kw.pop("silent", False), **kw}


def test_paired_comparison_counts_wins_losses_ties_and_the_sign_test():
    from core.sweep.stats import paired

    base = {f"f{i}": 0.5 for i in range(7)}
    other = {"f0": 0.1, "f1": 0.2, "f2": 0.3, "f3": 0.4, "f4": 0.0, "f5": 0.9, "f6": 0.5}  # 5 better, 1 worse, 1 tie
    out = paired(base, other, higher_is_better=False)
    assert (out["files"], out["wins"], out["losses"], out["ties"]) == (7, 5, 1, 1)
    # two-sided sign test on 5 of 6: 2 * P(X >= 5 | n=6, p=1/2) = 2 * (6 + 1) / 64
    assert out["p_value"] == pytest.approx(14 / 64)
    assert out["mean_diff"] == pytest.approx((0.1 + 0.2 + 0.3 + 0.4 + 0.0 + 0.9 + 0.5) / 7 - 0.5)
    lo, hi = out["ci"]
    assert lo <= out["mean_diff"] <= hi
    # chrF: higher is better, so the same numbers are 1 win and 5 losses
    flipped = paired(base, other, higher_is_better=True)
    assert (flipped["wins"], flipped["losses"], flipped["ties"]) == (1, 5, 1)


def test_bootstrap_interval_of_constant_values_is_the_value_and_brackets_the_mean():
    from core.sweep.stats import bootstrap_ci

    assert bootstrap_ci([0.25, 0.25, 0.25]) == (0.25, 0.25)
    assert bootstrap_ci([]) is None
    values = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    lo, hi = bootstrap_ci(values)
    assert 0.0 <= lo < 0.45 < hi <= 0.9


def test_summary_averages_seeds_per_file_and_counts_the_signals():
    from core.sweep.stats import markdown, summarize

    rows = [_row("a", "greedy", 0.2), _row("b", "greedy", 0.4),
            _row("a", "s", 0.0, seed=0), _row("a", "s", 0.2, seed=1),   # file a: mean 0.1
            _row("b", "s", 0.6, seed=0), _row("b", "s", 0.2, seed=1),   # file b: mean 0.4
            _row("quiet", "greedy", None, silent=True, text=" you", no_speech=1),
            _row("quiet", "s", None, seed=0, silent=True, text="", fallbacks=2, repetitions=1),
            _row("quiet", "s", None, seed=1, silent=True, text="Thank you.")]
    out = summarize(rows)
    g, s = out["strategies"]
    assert out["baseline"] == "greedy" and out["files"] == 3
    assert g["value"] == pytest.approx(0.3) and s["value"] == pytest.approx(0.25)
    # per-seed means: seed 0 (0.0 + 0.6) / 2 = 0.3, seed 1 (0.2 + 0.2) / 2 = 0.2; std (ddof 1) = 0.0707...
    assert s["seed_spread"] == pytest.approx(((0.3 - 0.25) ** 2 * 2) ** 0.5)
    assert s["seeds"] == [0, 1]
    assert (g["no_speech"], g["silent_inputs"], g["output_on_silence"]) == (1, 1, 1)
    assert (s["fallbacks"], s["repetitions"], s["silent_inputs"], s["output_on_silence"]) == (2, 1, 2, 1)
    vs = s["vs_baseline"]
    assert (vs["wins"], vs["losses"], vs["ties"]) == (1, 0, 1)  # a: 0.1 < 0.2 (win), b: 0.4 = 0.4 (tie)
    text = markdown(out)
    assert "sign test" in text and "scipy.stats.bootstrap" in text and "`s`" in text
    with pytest.raises(ValueError, match="baseline"):
        summarize(rows, baseline="beam:5")


# ---------------------------------------------------------------- specs
def test_a_seed_range_is_one_run_per_seed_and_other_specs_one_run():
    from core.sweep.specs import expand

    runs = expand(["greedy", "sample:T=0.8,seed=0..4", "beam:3"])
    assert [(r.spec, r.seed) for r in runs] == [("greedy", 0)] + [("sample:T=0.8,seed=0..4", s) for s in range(5)] + \
        [("beam:3", 0)]
    assert all(r.options.temperature == 0.8 and r.options.strategy == "sample" for r in runs[1:6])
    assert runs[6].options.num_beams == 3
    assert not any(r.options.capture_attention or r.options.capture_lens for r in runs)  # a sweep keeps neither
    assert expand(["greedy"], DecodingOptions(capture_attention=True))[0].options == runs[0].options
    for bad, why in ((["sample:seed=3..1"], "reversed"), (["greedy", "greedy"], "twice"), ([], "at least one"),
                     (["nonsense"], "unknown strategy")):
        with pytest.raises(ValueError, match=why):
            expand(bad)


def test_the_options_hash_changes_with_any_option_or_setting():
    from core.sweep.specs import options_hash

    a = options_hash("transcribe", "tiny.en", DecodingOptions())
    assert a == options_hash("transcribe", "tiny.en", DecodingOptions())
    assert a != options_hash("transcribe", "tiny.en", DecodingOptions(seed=1))
    assert a != options_hash("transcribe", "base", DecodingOptions())
    assert a != options_hash("transcribe", "tiny.en", DecodingOptions(), {"language": "de"})


# ---------------------------------------------------------------- data
def test_a_folder_gives_its_files_with_same_stem_references(tmp_path):
    from core.sweep.data import read_items, sha256_file

    (tmp_path / "sub").mkdir()
    for name in ("b.wav", "sub/a.flac", "c.wav"):
        (tmp_path / name).write_bytes(name.encode())
    (tmp_path / "b.txt").write_text("hello there\n", encoding="utf-8")
    (tmp_path / "sub" / "a.txt").write_text("", encoding="utf-8")  # silence: an empty reference
    (tmp_path / "notes.md").write_text("not an input")
    items = read_items("transcribe", tmp_path)
    assert [(i.id, i.reference) for i in items] == [("b.wav", "hello there"), ("c.wav", None), ("sub/a.flac", "")]
    assert items[0].input_hash == sha256_file(tmp_path / "b.wav")


def test_a_tsv_gives_one_item_per_line(tmp_path):
    from core.sweep.data import read_items, sha256_text

    tsv = tmp_path / "set.tsv"
    tsv.write_text("# header\nThe house.\tA casa.\n\nNo reference here\n", encoding="utf-8")
    items = read_items("translate", tsv)
    assert [(i.id, i.text, i.reference) for i in items] == [("set.tsv:2", "The house.", "A casa."),
                                                           ("set.tsv:4", "No reference here", None)]
    assert items[0].input_hash == sha256_text("The house.")


@pytest.mark.parametrize("task,make,why", [
    ("transcribe", lambda p: p, "no wav"),
    ("translate", lambda p: p, "is a folder"),
    ("transcribe", lambda p: (p / "x.tsv").write_text("a\tb") and p / "x.tsv", "is a file"),
    ("transcribe", lambda p: p / "missing", "no such file"),
])
def test_data_that_is_not_the_tasks_says_what_to_give(tmp_path, task, make, why):
    from core.sweep.data import DataError, read_items

    with pytest.raises(DataError, match=why):
        read_items(task, make(tmp_path))


def test_a_saved_data_set_without_the_datasets_package_says_how_to_get_it(tmp_path, monkeypatch):
    from core.sweep.data import DataError, read_items

    (tmp_path / "dataset_info.json").write_text("{}")
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(DataError, match="pip install datasets"):
        read_items("transcribe", tmp_path, audio_column="audio", text_column="text")


# ---------------------------------------------------------------- results
def _decoded(file, ohash, value=0.1):
    from core.sweep.decode import ROW_FIELDS, Decoded, trace_name

    row = {k: None for k in ROW_FIELDS}
    ihash = file.ljust(64, "0")
    row.update(file=file, spec="greedy", seed=0, metric="wer", value=value, tokens=2, token_ids=[1, 2],
               silent_reference=False, input_hash=ihash, options_hash=ohash, trace=trace_name(ihash, ohash))
    return Decoded(row=row, trace=b"\x1f\x8b")


def test_the_store_keeps_every_batch_at_once_and_compacts_them(tmp_path):
    from core.sweep.decode import Decoded
    from core.sweep.results import ResultStore

    store = ResultStore(tmp_path)
    assert store.append([_decoded("a", "o" * 64), _decoded("b", "o" * 64)]) == 2
    failed = Decoded(row={"file": "c", "spec": "greedy", "seed": 0, "input_hash": "c", "options_hash": "o",
                          "error": "bad audio"}, error="bad audio")
    assert store.append([_decoded("d", "p" * 64), failed]) == 1
    assert len(list((tmp_path / "results.parts").glob("*.parquet"))) == 2  # each batch stored as it came
    assert store.done() == {("a".ljust(64, "0"), "o" * 64), ("b".ljust(64, "0"), "o" * 64),
                            ("d".ljust(64, "0"), "p" * 64)}
    assert (tmp_path / _decoded("a", "o" * 64).row["trace"]).is_file()
    assert [f["error"] for f in store.failed()] == ["bad audio"]
    assert store.compact() == 3
    assert not (tmp_path / "results.parts").exists()
    assert [r["file"] for r in ResultStore(tmp_path).rows()] == ["a", "b", "d"]
    assert ResultStore(tmp_path).rows()[0]["token_ids"] == [1, 2]


# ---------------------------------------------------------------- the command
def test_without_ray_the_sweep_says_how_to_install_it_in_one_line_and_exits_2(monkeypatch, capsys, tmp_path):
    from core.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # as if ray were not installed
    code = main(["sweep", "transcribe", str(tmp_path), "--strategies", "greedy", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "pip install -e '.[sweep]'" in err


def test_a_bad_spec_or_baseline_is_a_usage_error(capsys, tmp_path):
    from core.cli import main

    (tmp_path / "a.wav").write_bytes(b"x")
    out = str(tmp_path / "o")
    assert main(["sweep", "transcribe", str(tmp_path), "--strategies", "greedy", "nonsense", "--out", out]) == 2
    assert "unknown strategy" in capsys.readouterr().err
    assert main(["sweep", "transcribe", str(tmp_path), "--strategies", "greedy", "--baseline", "beam:5",
                 "--out", out]) == 2
    assert "--baseline" in capsys.readouterr().err
    assert main(["sweep", "translate", str(tmp_path), "--strategies", "greedy", "--out", out]) == 2
    assert "TSV" in capsys.readouterr().err


def test_a_saved_data_set_gives_one_item_per_row_with_its_columns(tmp_path, monkeypatch):
    """``datasets`` is optional (not installed here): a stand-in module with ``load_from_disk``."""
    import types

    from core.sweep.data import DataError, read_items, sha256_text

    class Split:
        column_names = ["audio", "sentence", "en"]
        _fingerprint = "f00d"

        def __init__(self):
            self.rows = [{"audio": {"array": [0.0], "sampling_rate": 16000}, "sentence": " Hello. ", "en": "Hi"},
                         {"audio": {"array": [0.0], "sampling_rate": 16000}, "sentence": "", "en": "Bye"}]

        def __len__(self):
            return len(self.rows)

        def __getitem__(self, key):
            return [r[key] for r in self.rows] if isinstance(key, str) else self.rows[key]

    class DatasetDict(dict):
        pass

    fake = types.SimpleNamespace(DatasetDict=DatasetDict, load_from_disk=lambda path: DatasetDict(test=Split()))
    monkeypatch.setitem(sys.modules, "datasets", fake)
    (tmp_path / "dataset_dict.json").write_text("{}")
    with pytest.raises(DataError, match="--split"):
        read_items("transcribe", tmp_path, text_column="sentence")
    with pytest.raises(DataError, match="no column 'text'"):
        read_items("transcribe", tmp_path, text_column="text", split="test")
    items = read_items("transcribe", tmp_path, text_column="sentence", split="test")
    assert [(i.id, i.reference, i.dataset[2:]) for i in items] == [("test[0]", "Hello.", (0, "audio")),
                                                                   ("test[1]", "", (1, "audio"))]
    assert items[0].input_hash == sha256_text("f00d:0") != items[1].input_hash
    texts = read_items("translate", tmp_path, audio_column="en", text_column="sentence", split="test")
    assert [(i.text, i.input_hash) for i in texts] == [("Hi", sha256_text("Hi")), ("Bye", sha256_text("Bye"))]


def test_on_digital_silence_a_sweep_row_equals_the_single_run(whisper_tiny_en, tmp_path):
    """The single run skips a window of digital silence (no tokens, its label says so); the
    sweep's lanes must too, or every silent file's row would hold Whisper's "you"."""
    import numpy as np
    import soundfile as sf

    from core.events import Finished, SegmentEvent
    from core.sweep.data import read_items
    from core.sweep.decode import FileDecoder, Settings
    from core.sweep.specs import expand, options_hash
    from core.tasks.speech import SKIPPED

    sf.write(tmp_path / "quiet.wav", np.zeros(32000, dtype=np.float32), 16000)
    (tmp_path / "quiet.txt").write_text("", encoding="utf-8")
    decoder = FileDecoder.__new__(FileDecoder)  # the loaded tiny.en, not a second load
    decoder.task, decoder.settings, decoder.model = "transcribe", Settings(model="tiny.en"), whisper_tiny_en
    decoder.model_name, decoder.worker = whisper_tiny_en.name, "test"
    runs = expand(["greedy", "beam:2"])
    item = read_items("transcribe", tmp_path)[0]
    rows = [d.row for d in decoder.decode(item, [(r, options_hash("transcribe", "tiny.en", r.options)) for r in runs])]
    for run, row in zip(runs, rows):
        alone = list(whisper_tiny_en.decode(np.zeros(32000, dtype=np.float32), run.options))
        finished = next(ev for ev in alone if isinstance(ev, Finished))
        assert any(isinstance(ev, SegmentEvent) and ev.label.endswith(SKIPPED) for ev in alone)
        assert (row["text"], row["token_ids"]) == (finished.text, list(finished.token_ids)) == ("", [])
        assert row["silent_reference"] and row["value"] is None and row["skipped"] == 1


def test_a_compaction_cut_short_before_the_parts_went_reads_each_row_once(tmp_path):
    """compact() writes results.parquet, then removes the parts; a crash between the two leaves
    the rows in both. Every reader (rows, done, compact, the plots' and the window's) reads each
    (input hash, options hash, seed) once, and the next compaction folds them once."""
    import shutil

    from core.sweep.plots import read_sweep
    from core.sweep.results import ResultStore

    store = ResultStore(tmp_path)
    store.append([_decoded("a", "o" * 64), _decoded("b", "o" * 64)])
    store.append([_decoded("d", "p" * 64)])
    kept = tmp_path / "kept"
    shutil.copytree(tmp_path / "results.parts", kept)
    assert store.compact() == 3
    shutil.copytree(kept, tmp_path / "results.parts")  # the crash: results.parquet written, parts not yet removed
    (tmp_path / "summary.json").write_text("{}", encoding="utf-8")
    store = ResultStore(tmp_path)
    assert [r["file"] for r in store.rows()] == ["a", "b", "d"]
    from core.sweep.results import read_results

    assert read_results(tmp_path).num_rows == 3
    assert [r["file"] for r in read_sweep(tmp_path)[0]] == ["a", "b", "d"]
    store.append([_decoded("e", "p" * 64)])  # a resumed sweep adds a row beside them
    assert store.compact() == 4
    assert [r["file"] for r in ResultStore(tmp_path).rows()] == ["a", "b", "d", "e"]


# ---------------------------------------------------------------- --dtype int8
def test_sweep_accepts_dtype_int8_for_the_int8_tasks_only():
    from core.cli.commands import build_parser
    from core.cli.options import misapplied_flag

    parser = build_parser()
    for task in ("transcribe", "translate"):
        args = parser.parse_args(["sweep", task, "DATA", "--strategies", "greedy", "--out", "o", "--dtype", "int8"])
        assert misapplied_flag(args) is None, task
    args = parser.parse_args(["sweep", "ocr", "DATA", "--strategies", "greedy", "--out", "o", "--dtype", "int8"])
    problem = misapplied_flag(args)
    assert problem is not None and "--dtype int8" in problem and "ocr" in problem


def test_a_sweeps_int8_reaches_the_model_load_and_the_rows_trace(tmp_path, monkeypatch):
    import gzip
    import json

    from core.sweep.data import read_items
    from core.sweep.decode import FileDecoder, Settings
    from core.sweep.specs import expand, options_hash
    from core.tasks.speech import SpeechModel

    loads = []

    def fake_load(name, **kw):
        loads.append((name, kw))
        raise RuntimeError("not loaded in this test")

    monkeypatch.setattr(SpeechModel, "load", staticmethod(fake_load))
    with pytest.raises(RuntimeError):
        FileDecoder("transcribe", Settings(model="tiny.en", dtype="int8"))
    assert loads == [("tiny.en", {"dtype": "int8"})]

    # translate: the bundled en-pt in int8, decoded; the row's trace says so and reruns with --dtype int8
    settings = Settings(model="en-pt", dtype="int8")
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("Where is the train station?\tOnde fica a estação de comboios?\n", encoding="utf-8")
    decoder = FileDecoder("translate", settings)
    assert decoder.model.dtype == "int8"
    run = expand(["greedy"])[0]
    ohash = options_hash("translate", "en-pt", run.options, settings.for_hash("translate"))
    assert ohash != options_hash("translate", "en-pt", run.options, Settings(model="en-pt").for_hash("translate"))
    (done,) = decoder.decode(read_items("translate", tsv)[0], [(run, ohash)])
    assert done.error is None
    doc = json.loads(gzip.decompress(done.trace))
    assert doc["dtype"] == "int8" and doc["rerun"]["dtype"] == "int8"
    argv = doc["rerun"]["argv"]
    assert argv[argv.index("--dtype") + 1] == "int8"


def test_a_local_sweep_runs_one_torch_thread_per_worker(monkeypatch, tmp_path):
    """Workers run 1 torch thread each, also when one worker has the machine's CPUs to itself
    (two threads per worker spun against Ray's processes: 5x slower in bench_sweep)."""
    import sys
    import types

    from core.sweep import ray_runner

    fake = types.SimpleNamespace(is_initialized=lambda: False, init=lambda **kw: None,
                                 cluster_resources=lambda: {"CPU": 2.0})
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setattr(ray_runner, "_link_logs", lambda out: None)
    monkeypatch.setattr(ray_runner.os, "cpu_count", lambda: 2)
    started, workers, cpus, threads = ray_runner.start_ray(None, 1, tmp_path, sys.stderr)
    assert (started, workers, cpus, threads) == (True, 1, 2.0, 1)
    started, workers, cpus, threads = ray_runner.start_ray(None, 2, tmp_path, sys.stderr)
    assert (workers, cpus, threads) == (2, 1.0, 1)


def test_a_hub_data_set_id_is_read_with_load_dataset_and_its_split(tmp_path, monkeypatch):
    """Online users give a hub id (not a path): ``datasets.load_dataset(id, split=...)`` reads it
    (a stand-in here: no internet), the workers read a row the same way, and offline the
    failure is one line."""
    import types

    from core.sweep.data import DataError, load_dataset_split, read_items

    class Split:
        column_names = ["audio", "sentence"]
        _fingerprint = "beef"

        def __init__(self):
            self.rows = [{"audio": {"array": [0.0], "sampling_rate": 16000}, "sentence": "Hi."}]

        def __len__(self):
            return len(self.rows)

        def __getitem__(self, key):
            return [r[key] for r in self.rows] if isinstance(key, str) else self.rows[key]

    calls = []

    def load_dataset(name, split=None):
        calls.append((name, split))
        if name != "someone/speech":
            raise FileNotFoundError(f"Couldn't reach '{name}' on the Hub (LocalEntryNotFoundError)\nmore")
        return Split()

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match="--split"):
        read_items("transcribe", "someone/speech", text_column="sentence")
    items = read_items("transcribe", "someone/speech", text_column="sentence", split="test")
    assert [(i.id, i.reference, i.dataset) for i in items] == [("test[0]", "Hi.", ("hub:someone/speech", "test", 0, "audio"))]
    assert load_dataset_split(items[0].dataset[0], "test")[0]["sentence"] == "Hi."  # what a worker reads
    assert calls[-1] == ("someone/speech", "test")
    with pytest.raises(DataError, match="could not load the hub data set nobody/none .*Couldn't reach"):
        read_items("transcribe", "nobody/none", split="test")
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(DataError, match="hub data set id .*pip install datasets"):
        read_items("transcribe", "someone/speech", split="test")
    with pytest.raises(DataError, match="no such file or folder"):
        read_items("transcribe", "missing_folder/clips.wav")
