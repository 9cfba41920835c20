"""What the Speech tab says after a run besides its tokens (gui/tabs/speech.py): how many
tokens were decoded and kept, the windows skipped as silence and the rule that skipped them
("1 window skipped as silence (Whisper's rule: no-speech 0.81 > 0.6 and avg log-prob -1.42 < -1)",
"… (loudness rule: no-speech 0.95 > 0.6 and loudest 20 ms −inf < −50 dBFS)"), and the warnings
(a fixed window that loops, a kept long-form window the model thinks silent). Numbers only: no model call.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def show_run_report(tab: Any, fin: Any) -> None:
    """After a run of the Speech tab ``tab``: the banner shows the warnings of
    :func:`run_report`, the status bar its status line."""
    warns, status = run_report(tab, fin)
    if warns:
        tab.banner.show_message("\n".join(warns))
    if status:
        tab.statusMessage.emit(status)


def run_report(tab: Any, fin: Any) -> tuple[list[str], str]:
    """(warnings, status line) of the finished run ``fin`` (a ``core.events.Finished``) of
    the Speech tab ``tab``: a long-form run's attempts, or a fixed-window run's segments.

    Returns:
        every warning (for the banner; [] for none), and the status line ("" when there is
        neither a window skipped as silence nor a warning: nothing to add).
    """
    from core.tasks.longform import LongFormOptions
    from core.tasks.longform_verdicts import attempt_warning, loudest_db, silence_note
    from core.tasks.speech import SKIPPED, WINDOW_SAMPLES, window_warnings

    warns: list[str] = []
    if tab.long_form.is_run:
        attempts = tab.long_form.attempts
        skipped = [(a.no_speech_prob, a.loudest_db, a.avg_logprob) for a in attempts if a.verdict == "silence"]
        rule = tab.long_form.panel.options()
        warns = [w for w in (attempt_warning(a, rule.no_speech_threshold) for a in attempts) if w]
        what = f"Decoded: {fin.stats.n_tokens} tokens, {len(fin.token_ids)} kept ({fin.reason})"
    else:
        rule = LongFormOptions()  # the fixed windows' skip rule (core.tasks.speech_windows.skip_silence)
        segs = list(tab.run.segments(0))
        audio = tab.audio if tab.audio is not None else np.zeros(0, np.float32)
        skipped = [(s.no_speech_prob, loudest_db(audio[s.segment * WINDOW_SAMPLES:(s.segment + 1) * WINDOW_SAMPLES]))
                   for s in segs if s.label.endswith(SKIPPED)]
        decode = getattr(getattr(tab.model, "backend", None), "decode", None)
        if decode is not None:
            warns = window_warnings(segs + list(tab.run.branch_steps(0)), decode)
        what = f"Decoded: {fin.stats.n_tokens} tokens ({fin.reason})"
    note = silence_note(skipped, rule)
    if not (note or warns):
        return warns, ""
    return warns, " · ".join(x for x in (what, note, warns[0] if warns else "") if x)
