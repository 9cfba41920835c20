"""What the OCR tab's worker thread does for one run, as one stream of events.

Detection (CRAFT, tile by tile: :class:`Stage` events; skipped when the tab has the
lines of this image and region cached) gives :class:`LinesDetected`; the model reads the
lines into one token stream (``SegmentEvent`` per line, ``StepEvent`` per token); then
english_g2's CTC head reads each line for the comparison table (:class:`CTCReadings`,
skipped when cached). ``Finished`` comes last, so the table is complete when the tab
reports the run finished.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterator

from core.events import Finished
from core.options import DecodingOptions


@dataclass(frozen=True)
class LinesDetected:
    """Worker -> tab: the detected lines (``core.tasks.ocr.TextLine``) for detection key ``key``."""

    key: Hashable
    lines: list


@dataclass(frozen=True)
class Stage:
    """Worker -> tab: where the run stands, for the progress bar.

    Attributes:
        stage: "detect" (CRAFT, ``done`` tiles of ``total``) or "compare" (english_g2's
            CTC reading, ``done`` lines of ``total``); the model load and the reading of
            the lines are followed from their own signals and events.
        done, total: steps finished, steps in all.
        text: the bar's text.
    """

    stage: str
    done: int
    total: int
    text: str


@dataclass(frozen=True)
class CTCReadings:
    """Worker -> tab: english_g2's CTC reading of each line of detection ``key`` ("" where empty)."""

    key: Hashable
    readings: list[str]


def no_text_message(region: tuple[int, int, int, int] | None) -> str:
    """The banner text when detection finds no text (in the whole image or in ``region``)."""
    if region is not None:
        x, y, w, h = region
        return (f"No text found in the selected region ({w}×{h} px at {x}, {y}). "
                "Drag a larger box around a text line, or press Whole image.")
    return ("No text found in the image. Open an image with printed text (e.g. a screenshot or a photo of a page); "
            "very small text reads better when cropped and enlarged.")


def read_image(model: Any, image: Any, region, key: Hashable, options: DecodingOptions,
               lines: list | None, ctc: list[str] | None) -> Callable[[Callable[[], bool]], Iterator[Any]]:
    """The worker's generator for one run: detect (unless ``lines`` are cached), read the
    lines, then the CTC readings (unless ``ctc`` is cached); see the module docstring.

    Raises (in the worker, shown in the banner):
        ValueError: no text found.
    """

    def gen(cancel):
        found = lines
        if found is None:
            found = yield from _detect(model, image, region, cancel)
            yield LinesDetected(key, found)
            if not found:
                raise ValueError(no_text_message(region))
        fin = None
        for ev in model.decode(image, options, lines=found, region=region, cancel=cancel):
            if isinstance(ev, Finished):
                fin = ev  # sent after the CTC readings, so decodeFinished sees a complete table
                continue
            yield ev
        if ctc is None and fin is not None and not fin.cancelled and getattr(model, "has_ctc", False):
            readings = []
            for i, line in enumerate(found):
                yield Stage("compare", i, len(found), f"CTC reading (comparison), line {i + 1} of {len(found)}")
                if cancel():
                    break
                readings.append(model.ctc_reading(image, line))
            else:
                yield CTCReadings(key, readings)
        if fin is not None:
            yield fin

    return gen


def _detect(model: Any, image: Any, region, cancel: Callable[[], bool]):
    """Run ``model``'s detection in the worker, yielding a :class:`Stage` per CRAFT tile
    (``OCRModel.detect_steps``; a model with only ``detect`` is run in one go); returns
    the lines (use with ``yield from``)."""
    steps = getattr(model, "detect_steps", None)
    if steps is None:
        return list(model.detect(image, region=region))
    it = steps(image, region=region, cancel=cancel)
    while True:
        try:
            p = next(it)
        except StopIteration as stop:
            return list(stop.value)
        yield Stage(p.stage, p.done, p.total, p.text)
