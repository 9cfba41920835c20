"""The sweep's plots (issue 24 §4): PNG + SVG written from a sweep folder; the scatter has
one point per file scored by both strategies (the data handed to matplotlib, not pixels)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("pyarrow")

from core.sweep.plots import (PLOT_NAMES, frontier_points, pareto, read_sweep, scatter_figure,  # noqa: E402
                              scatter_panels, write_plots)
from tests.helpers.sweep_synthetic import make_sweep  # noqa: E402

SPECS = ["greedy", "beam:3", "sample:T=0.8,seed=0..1"]


@pytest.fixture
def sweep(tmp_path):
    inputs = [{"id": f"clips/c{i:02d}.wav"} for i in range(12)]
    return make_sweep(tmp_path / "out", inputs, SPECS)


def test_write_plots_writes_png_and_svg(sweep):
    paths = write_plots(sweep)
    assert [p.name for p in paths] == [f"{n}.{e}" for n in PLOT_NAMES for e in ("png", "svg")]
    for p in paths:
        assert p.parent == sweep / "plots" and p.stat().st_size > 1000
        head = p.read_bytes()[:8]
        assert head.startswith(b"\x89PNG") if p.suffix == ".png" else b"<svg" in p.read_bytes()[:2000]
    assert not list((sweep / "plots").glob(".*tmp*"))  # no temporary left


def test_scatter_has_one_point_per_file(sweep):
    rows, summary = read_sweep(sweep)
    panels = scatter_panels(rows, summary)
    assert [p.spec for p in panels] == ["beam:3", "sample:T=0.8,seed=0..1"]
    for p in panels:
        assert p.baseline == "greedy" and len(p.files) == 12 == len(p.x) == len(p.y)
    # the seeds of a file are averaged: sample's y is the mean of its two seeds' values
    f = panels[1].files[0]
    seeds = [r["value"] for r in rows if r["file"] == f and r["spec"] == "sample:T=0.8,seed=0..1"]
    assert len(seeds) == 2 and panels[1].y[0] == pytest.approx(sum(seeds) / 2)
    fig = scatter_figure(panels, summary)
    axes = [ax for ax in fig.axes if ax.collections]
    assert len(axes) == 2
    for ax, p in zip(axes, panels):
        offsets = ax.collections[0].get_offsets()
        assert len(offsets) == 12
        assert offsets[:, 0].tolist() == pytest.approx([100 * v for v in p.x])  # WER in percent
        assert len(ax.lines) == 1  # the diagonal
        (xs, ys) = ax.lines[0].get_data()
        assert list(xs) == list(ys)


def test_scatter_leaves_out_files_without_a_score(tmp_path):
    inputs = [{"id": f"c{i}.wav"} for i in range(5)]
    out = make_sweep(tmp_path / "out", inputs, ["greedy", "beam:2"])
    import pyarrow.parquet as pq

    table = pq.read_table(out / "results.parquet").to_pylist()
    for r in table:
        if r["file"] == "c3.wav" and r["spec"] == "beam:2":
            r["value"] = None
    summary = json.loads((out / "summary.json").read_text())
    (panel,) = scatter_panels(table, summary)
    assert panel.files == ["c0.wav", "c1.wav", "c2.wav", "c4.wav"]


def test_frontier_and_pareto():
    summary = {"strategies": [{"spec": "a", "decode_s": 1.0, "value": 0.2}, {"spec": "b", "decode_s": 2.0, "value": 0.1},
                              {"spec": "c", "decode_s": 3.0, "value": 0.3}, {"spec": "d", "decode_s": None, "value": 0.1}]}
    pts = frontier_points(summary)
    assert [p[0] for p in pts] == ["a", "b", "c"]
    assert [p[0] for p in pareto(pts, higher_is_better=False)] == ["a", "b"]  # c is slower and worse than both
    assert [p[0] for p in pareto(pts, higher_is_better=True)] == ["a", "c"]


def test_missing_summary_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="summary.json"):
        write_plots(tmp_path)
