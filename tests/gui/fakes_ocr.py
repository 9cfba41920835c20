"""A fake OCR model (no torch) that follows the ``core.tasks.ocr`` contract, for OCR tab tests.

"Detection" finds the dark rows of the image: every horizontal band of rows containing
pixels darker than 128 is a line, boxed by the dark pixels' x extent; ``detect_steps``
pretends to run it in ``tiles`` tiles (``core.tasks.ocr.OCRProgress`` per tile, like
``OCRModel.detect_steps``). Each line is "read" as ``LINE_TEXT`` one character per step,
with a cross-attention that peaks at column ``step_in_line`` (moving right), so a test
can predict where the overlay goes. ``tiles_done`` and ``lines_started`` count the work
done, so a test can see where a cancel stopped it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from core.events import Finished, RunStats, SegmentEvent, StepEvent, TokenProb

from .fakes import with_lens

LINE_TEXT = "ab12"
PX_PER_COLUMN = 4


@dataclass(frozen=True)
class FakeTextLine:
    """Same fields and ``column_x`` as ``core.tasks.ocr.TextLine``."""

    index: int
    box: tuple[int, int, int, int]
    n_columns: int
    path: str = "detected"

    def column_x(self, col: int) -> tuple[float, float]:
        x0, _y0, x1, _y1 = self.box
        w = (x1 - x0) / self.n_columns
        return (x0 + col * w, x0 + (col + 1) * w)


class FakeOCRModel:
    """Detect/decode/ctc_reading with synthetic events; records the regions it was asked for."""

    name = "fake-ocr"
    load_s = 0.0
    has_ctc = True

    def __init__(self, delay_s: float = 0.0, layers: int = 2, heads: int = 2, tiles: int = 1,
                 tile_delay_s: float = 0.0):
        self.delay_s = delay_s
        self.tiles, self.tile_delay_s = tiles, tile_delay_s
        self.tiles_done = 0
        self.lines_started = 0
        self.layers, self.heads = layers, heads
        self.encode_count = 0
        self.detect_calls: list = []
        self.decode_regions: list = []
        self.ctc_calls = 0
        self._seen: set = set()
        self._lock = threading.Lock()

    def detect(self, image, region=None):
        self.detect_calls.append(region)
        a = np.asarray(image.convert("L"), dtype=np.uint8)
        x_off = y_off = 0
        if region is not None:
            x, y, w, h = region
            a = a[y : y + h, x : x + w]
            x_off, y_off = x, y
        dark = a < 128
        rows = np.flatnonzero(dark.any(axis=1))
        lines: list[FakeTextLine] = []
        if rows.size == 0:
            return lines
        bands, start, prev = [], rows[0], rows[0]
        for r in rows[1:]:
            if r != prev + 1:
                bands.append((start, prev))
                start = r
            prev = r
        bands.append((start, prev))
        # one band is one line read whole (as core.tasks.ocr does), several are "detected"
        path = "detected" if len(bands) > 1 else ("region" if region is not None else "whole image")
        for i, (r0, r1) in enumerate(bands):
            cols = np.flatnonzero(dark[r0 : r1 + 1].any(axis=0))
            x0, x1 = int(cols[0]) + x_off, int(cols[-1]) + 1 + x_off
            box = (x0, int(r0) + y_off, x1, int(r1) + 1 + y_off)
            lines.append(FakeTextLine(i, box, max(len(LINE_TEXT) + 1, (x1 - x0) // PX_PER_COLUMN), path))
        return lines

    def detect_steps(self, image, region=None, *, cancel=None):
        """``detect`` as ``OCRModel.detect_steps``: an OCRProgress before each tile and at the end."""
        from core.tasks.ocr import OCRCancelled, OCRProgress

        for k in range(self.tiles):
            if cancel is not None and cancel():
                raise OCRCancelled("detection cancelled")
            yield OCRProgress("detect", k, self.tiles, f"detecting text lines (tile {k + 1} of {self.tiles})")
            if self.tile_delay_s:
                time.sleep(self.tile_delay_s)
            self.tiles_done += 1
        lines = self.detect(image, region)
        yield OCRProgress("detect", self.tiles, self.tiles, f"{len(lines)} text boxes found")
        return lines

    def decode(self, image, options, *, lines=None, region=None, cancel=None):
        options = options.validate()
        self.decode_regions.append(region)
        if lines is None:
            lines = self.detect(image, region)
        if not lines:
            raise ValueError("No text found in the image (fake)")
        n = min(len(LINE_TEXT), options.max_new_tokens)
        step = 0
        texts, ids = [], []
        for line in lines:
            key = (id(image), line.box)
            with self._lock:
                if key not in self._seen:
                    self._seen.add(key)
                    self.encode_count += 1
            if cancel is not None and cancel() and line.index > 0:  # between lines, as OCRModel.decode
                yield Finished(text="", token_ids=ids, stats=RunStats(), cancelled=True, reason="cancelled")
                return
            self.lines_started += 1
            yield SegmentEvent(segment=line.index, label=f"line {line.index + 1}", source_offset=0,
                               source_len=line.n_columns)
            for k in range(n):
                if cancel is not None and cancel():
                    yield Finished(text="", token_ids=ids, stats=RunStats(), cancelled=True, reason="cancelled")
                    return
                if self.delay_s:
                    time.sleep(self.delay_s)
                att = np.full((self.layers, self.heads, line.n_columns), 0.01, np.float32)
                att[:, :, k] = 1.0
                ch = LINE_TEXT[k]
                tid = ord(ch)
                tp = [TokenProb(tid, ch, 0.9), TokenProb(ord("z"), "z", 0.05)]
                yield with_lens(StepEvent(step=step, token_id=tid, text=ch, prob=0.9, raw_prob=0.8, topk=tp,
                                          raw_topk=tp, entropy=0.3, cross_attention=att / att.sum(-1, keepdims=True),
                                          segment=line.index), options)
                ids.append(tid)
                step += 1
            texts.append(LINE_TEXT[:n])
        yield Finished(text="\n".join(texts), token_ids=ids, stats=RunStats(decode_s=0.001 * step, n_tokens=step))

    def fork(self, image, options, *, segment, forced_ids, step_offset, lines=None, region=None, cancel=None,
             reuse_cache=True):
        """Re-read line ``segment`` with ``forced_ids`` forced (the ``OCRModel.fork`` contract):
        its SegmentEvent, the forced characters (none of the original's prefix again with
        ``reuse_cache``), then ``LINE_TEXT`` on from one past the forced length (so the branch's
        line is one character shorter after a change), and a Finished."""
        self.fork_calls = getattr(self, "fork_calls", []) + [(segment, tuple(forced_ids), step_offset)]
        lines = lines if lines is not None else self.detect(image, region)
        line = lines[segment]
        yield SegmentEvent(segment=segment, label=f"line {segment + 1}", source_offset=0, source_len=line.n_columns)
        own = [ord(c) for c in LINE_TEXT]
        forced = [int(t) for t in forced_ids]
        reused = 0
        while reuse_cache and reused < len(forced) - 1 and forced[reused] == own[reused]:
            reused += 1
        same = forced == own[: len(forced)]
        rest = LINE_TEXT[len(forced):] if same else LINE_TEXT[len(forced) + 1:]
        ids = list(forced)
        for k, tid in enumerate(forced + [ord(c) for c in rest]):
            if k < reused:
                continue
            att = np.full((self.layers, self.heads, line.n_columns), 0.01, np.float32)
            att[:, :, min(k, line.n_columns - 1)] = 1.0
            ch = chr(tid)
            tp = [TokenProb(ord(LINE_TEXT[min(k, len(LINE_TEXT) - 1)]), LINE_TEXT[min(k, len(LINE_TEXT) - 1)], 0.9),
                  TokenProb(ord("z"), "z", 0.05)]
            p = next((t.prob for t in tp if t.id == tid), 0.01)
            yield StepEvent(step=step_offset + k, token_id=tid, text=ch, prob=p, raw_prob=p, topk=tp, raw_topk=tp,
                            entropy=0.3, cross_attention=att / att.sum(-1, keepdims=True), segment=segment)
            if k >= len(forced):
                ids.append(tid)
        stats = RunStats(decode_s=0.001, n_tokens=len(ids) - reused)
        stats.reused_tokens = reused
        yield Finished(text="".join(chr(t) for t in ids), token_ids=ids, stats=stats)

    def ctc_reading(self, image, line):
        self.ctc_calls += 1
        return LINE_TEXT.upper()
