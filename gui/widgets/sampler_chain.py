"""The sampler chain as an ordered list: drag (or Alt+Up / Alt+Down) to reorder, tick to
switch a stage on or off.

Each row is one stage of the registry (``core.processors.stages``: its label, help, "off"
test and the strategies it applies to) with its current value ("top-k 40").
A stage at its "off" value is shown dimmed and in italics (it is in the chain but does
nothing); a stage that cannot run now is disabled with the reason in its tooltip: the
warpers (temperature and the filters) under a strategy that does not sample, as
transformers' ``generate()`` adds warpers only when ``do_sample``, and stages the tab
says it cannot feed (the encoder stages need source token ids: translation only).

:class:`SamplerChain` emits ``changed`` once per user edit (a drag, a key, a tick, an
order reset); the options panel reads :meth:`SamplerChain.order` and
:meth:`SamplerChain.disabled` into ``DecodingOptions.sampler_order`` /
``disabled_stages``.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from PySide6.QtCore import QModelIndex, QSize, Qt, Signal
from PySide6.QtGui import QBrush, QFont, QKeyEvent, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QToolButton,
    QWidget,
)

from core.options import (
    DEFAULT_SAMPLER_ORDER,
    LLAMA_CPP_SAMPLER_ORDER,
    SAMPLING_STRATEGIES,
    STAGE_LABELS,
    STAGES,
    DecodingOptions,
)
from core.processors.stages import FIELD_STAGE, STAGE, STAGE_FIELDS  # noqa: F401 (re-exported for the panel)

from .layouts import STRETCH, hbox, vbox

#: what each stage does and where it comes from (the row's tooltip), from the registry
STAGE_HELP: dict[str, str] = {name: s.help for name, s in STAGE.items()}


def stage_is_off(stage: str, o: DecodingOptions) -> bool:
    """Whether ``stage`` is at its "off" value in ``o`` (it would build no processor;
    the registry's ``is_off``, which the chain builder uses too)."""
    return STAGE[stage].is_off(o)


def stage_summary(stage: str, o: DecodingOptions) -> str:
    """The row text: the stage's label and its value, e.g. "top-k 40", "min-p off"."""
    return STAGE[stage].row_text(o)


def strategy_reason(stage: str, strategy: str) -> str | None:
    """Why ``stage`` does not run under ``strategy``, or None when it does."""
    if STAGE[stage].applies_to(strategy):
        return None
    if STAGE[stage].strategy_note:  # neither a penalty nor a warper (contrastive decoding)
        return f"{STAGE[stage].strategy_note} (strategies {', '.join(STAGE[stage].strategies)}; not {strategy})."
    why = (
        f"{STAGE_LABELS.get(stage, stage)} shapes sampling only (strategies {', '.join(SAMPLING_STRATEGIES)}); "
        f"{strategy} uses the penalised scores as they are (transformers adds warpers only when do_sample)."
    )
    if stage == "top_k" and strategy == "contrastive":
        why += " Contrastive search uses top-k as its number of candidates (Strategy section)."
    return why


class ChainList(QListWidget):
    """The list of stages; Alt+Up / Alt+Down ask to move the current stage. Its preferred
    height shows ``rows`` rows (the rest scroll, so a drag can reach every place)."""

    moveRequested = Signal(int)
    rows = 12

    def sizeHint(self) -> QSize:  # noqa: N802
        row = self.sizeHintForRow(0) if self.count() else 18
        return QSize(super().sizeHint().width(), min(self.rows, max(1, self.count())) * row + 2 * self.frameWidth())

    def keyPressEvent(self, e: QKeyEvent) -> None:  # noqa: N802
        if e.modifiers() & Qt.KeyboardModifier.AltModifier and e.key() in (Qt.Key.Key_Up, Qt.Key.Key_Down):
            self.moveRequested.emit(-1 if e.key() == Qt.Key.Key_Up else 1)
            e.accept()
            return
        super().keyPressEvent(e)


class SamplerChain(QWidget):
    """The stages in their order, each with a tick box and its value.

    Signals:
        changed(): the user reordered the stages or switched one on or off.
        stageActivated(str): a stage was double-clicked or Enter pressed on it (the panel
            shows its controls).
    """

    changed = Signal()
    stageActivated = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.list = ChainList()
        self.list.setObjectName("samplerChainList")
        self.list.setDragDropMode(QAbstractItemView.DragDropMode.InternalMove)
        self.list.setDefaultDropAction(Qt.DropAction.MoveAction)
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.list.setAlternatingRowColors(True)
        self.list.setUniformItemSizes(True)
        self.list.setToolTip(
            "The sampler chain: stages run top to bottom. Drag a stage (or Alt+Up / Alt+Down) to move it, "
            "tick it to switch it on or off; double-click to edit its value."
        )
        self._unavailable: dict[str, str] = {}
        self._changed_stages: set[str] = set()
        self._state: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        self._syncing = False
        for stage in DEFAULT_SAMPLER_ORDER:
            item = QListWidgetItem(STAGE_LABELS.get(stage, stage))
            item.setData(Qt.ItemDataRole.UserRole, stage)
            item.setCheckState(Qt.CheckState.Checked)
            self.list.addItem(item)
        self._apply_flags()
        self._state = (self.order(), self.disabled())

        self.up_button = QToolButton()
        self.up_button.setArrowType(Qt.ArrowType.UpArrow)
        self.up_button.setToolTip("Move the selected stage up (Alt+Up)")
        self.up_button.clicked.connect(lambda: self.move_current(-1))
        self.down_button = QToolButton()
        self.down_button.setArrowType(Qt.ArrowType.DownArrow)
        self.down_button.setToolTip("Move the selected stage down (Alt+Down)")
        self.down_button.clicked.connect(lambda: self.move_current(1))
        self.transformers_button = QToolButton()
        self.transformers_button.setText("transformers order")
        self.transformers_button.setToolTip(
            "Put the stages in transformers' order: the logits processors of GenerationMixin._get_logits_processor, "
            "then the warpers (temperature, top-k, top-p, …); on/off ticks are kept"
        )
        self.transformers_button.clicked.connect(lambda: self.set_order(DEFAULT_SAMPLER_ORDER, user=True))
        self.llama_button = QToolButton()
        self.llama_button.setText("llama.cpp order")
        self.llama_button.setToolTip(
            "Put the stages in llama.cpp's default order (common/common.h: penalties, dry, top_n_sigma, top_k, "
            "typ_p, top_p, min_p, xtc, temperature), the stages llama.cpp lacks after them; on/off ticks are kept"
        )
        self.llama_button.clicked.connect(lambda: self.set_order(LLAMA_CPP_SAMPLER_ORDER, user=True))

        buttons = hbox(self.up_button, self.down_button, STRETCH, QLabel("order:"), self.transformers_button,
                       self.llama_button, spacing=2)
        vbox(self.list, buttons, spacing=2, parent=self)

        model = self.list.model()
        model.rowsMoved.connect(self._maybe_changed)
        model.rowsInserted.connect(self._maybe_changed)
        model.rowsRemoved.connect(self._maybe_changed)
        self.list.itemChanged.connect(self._maybe_changed)
        self.list.moveRequested.connect(self.move_current)
        self.list.itemDoubleClicked.connect(self._activate)
        self.list.itemActivated.connect(self._activate)
        self.list.currentRowChanged.connect(lambda _r: self._update_buttons())
        # the panel scrolls at its minimum height: show 10 rows there
        self.list.setMinimumHeight(10 * (self.list.sizeHintForRow(0) or 18) + 2 * self.list.frameWidth())
        self._update_buttons()

    # ------------------------------------------------------------------ state
    def stage_item(self, stage: str) -> QListWidgetItem:
        """The row of ``stage``.

        Raises:
            KeyError: not a stage.
        """
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(Qt.ItemDataRole.UserRole) == stage:
                return item
        raise KeyError(stage)

    def row_of(self, stage: str) -> int:
        """The position of ``stage`` in the chain (0 = runs first)."""
        return self.list.row(self.stage_item(stage))

    def order(self) -> tuple[str, ...]:
        """The stages top to bottom (``DecodingOptions.sampler_order``)."""
        return tuple(self.list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.list.count()))

    def disabled(self) -> tuple[str, ...]:
        """The unticked stages, in chain order (``DecodingOptions.disabled_stages``)."""
        return tuple(
            self.list.item(i).data(Qt.ItemDataRole.UserRole)
            for i in range(self.list.count())
            if self.list.item(i).checkState() != Qt.CheckState.Checked
        )

    def set_chain(self, order: Iterable[str], disabled: Iterable[str] = ()) -> None:
        """Show ``order`` (stages it lacks are appended in the default order) with the
        ``disabled`` stages unticked; emits nothing."""
        self._syncing = True
        try:
            self._reorder(order)
            off = set(disabled)
            for i in range(self.list.count()):
                item = self.list.item(i)
                state = Qt.CheckState.Unchecked if item.data(Qt.ItemDataRole.UserRole) in off else Qt.CheckState.Checked
                if item.checkState() != state:
                    item.setCheckState(state)
        finally:
            self._syncing = False
        self._state = (self.order(), self.disabled())
        self._update_buttons()

    def set_order(self, order: Iterable[str], user: bool = False) -> None:
        """Put the stages in ``order``, keeping their ticks; ``user``: emit ``changed``
        if the order changed (the reset buttons)."""
        self._syncing = True
        try:
            self._reorder(order)
        finally:
            self._syncing = False
        if user:
            self._maybe_changed()
        else:
            self._state = (self.order(), self.disabled())

    def set_stage_enabled(self, stage: str, on: bool) -> None:
        """Tick (``on``) or untick ``stage``, as the user would (emits ``changed``)."""
        self.stage_item(stage).setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)

    def move_stage(self, stage: str, delta: int) -> bool:
        """Move ``stage`` ``delta`` rows (negative: up), as a drag would end (one model
        row move); emits ``changed``. False when it cannot move that far."""
        row = self.row_of(stage)
        dest = row + delta
        if delta == 0 or not 0 <= dest < self.list.count():
            return False
        # moveRow's destination is the row the item goes before, counted before the move
        ok = self.list.model().moveRow(QModelIndex(), row, QModelIndex(), dest + 1 if delta > 0 else dest)
        if ok:
            self.list.setCurrentRow(dest)
        return ok

    def move_current(self, delta: int) -> bool:
        """Move the selected stage (Alt+Up / Alt+Down, the arrow buttons)."""
        item = self.list.currentItem()
        if item is None or not item.flags() & Qt.ItemFlag.ItemIsEnabled:
            return False
        return self.move_stage(item.data(Qt.ItemDataRole.UserRole), delta)

    def set_unavailable(self, reasons: Mapping[str, str]) -> None:
        """Stages this tab cannot run, with the reason shown in their tooltips."""
        self._unavailable = dict(reasons)

    def unavailable_reason(self, stage: str, strategy: str) -> str | None:
        """Why ``stage`` cannot run (tab first, then strategy), or None."""
        return self._unavailable.get(stage) or strategy_reason(stage, strategy)

    # ------------------------------------------------------------------ view
    def update_view(self, options: DecodingOptions, changed: Iterable[str] = ()) -> None:
        """Show the values of ``options`` (not validated: a half-typed state is fine),
        dim stages at their off value, disable the ones that cannot run and mark (bold)
        the ``changed`` stages."""
        self._changed_stages = set(changed)
        palette = self.list.palette()
        dim = QBrush(palette.color(QPalette.ColorGroup.Active, QPalette.ColorRole.PlaceholderText))
        normal = QBrush(palette.color(QPalette.ColorGroup.Active, QPalette.ColorRole.Text))
        self._syncing = True
        try:
            for i in range(self.list.count()):
                item = self.list.item(i)
                stage = item.data(Qt.ItemDataRole.UserRole)
                try:
                    off = stage_is_off(stage, options)
                    text = stage_summary(stage, options)
                except (TypeError, ValueError):
                    off, text = False, STAGE_LABELS.get(stage, stage)
                reason = self.unavailable_reason(stage, getattr(options, "chain_strategy", options.strategy))
                if reason:
                    text += " — n/a"  # told apart from a stage at its off value (hover: why)
                marked = stage in self._changed_stages
                if item.text() != text:
                    item.setText(text)
                font = QFont(self.list.font())
                font.setItalic(off)
                font.setBold(marked)
                item.setFont(font)
                item.setForeground(dim if off else normal)
                item.setData(Qt.ItemDataRole.UserRole + 1, reason or "")
                item.setData(Qt.ItemDataRole.UserRole + 2, off)
                item.setToolTip(self._tooltip(stage, item, off, reason, marked))
            self._apply_flags()
        finally:
            self._syncing = False
        self._update_buttons()

    def is_dimmed(self, stage: str) -> bool:
        """Whether ``stage`` is shown dimmed (at its off value)."""
        return bool(self.stage_item(stage).data(Qt.ItemDataRole.UserRole + 2))

    def reason(self, stage: str) -> str:
        """Why ``stage`` is disabled now ("" when it can run)."""
        return self.stage_item(stage).data(Qt.ItemDataRole.UserRole + 1) or ""

    def _tooltip(self, stage: str, item: QListWidgetItem, off: bool, reason: str | None, marked: bool) -> str:
        st = STAGE[stage]
        kind = ("penalty / constraint: every strategy" if st.every_strategy
                else "warper: sampling strategies only" if st.is_warper else f"strategies {', '.join(st.strategies)}")
        lines = [f"<b>{STAGE_LABELS.get(stage, stage)}</b> ({kind})", STAGE_HELP.get(stage, "")]
        if reason:
            lines.append(f"<i>Not used now:</i> {reason}")
        elif item.checkState() != Qt.CheckState.Checked:
            lines.append("<i>Switched off</i> (its value is kept); tick it to switch it on.")
        elif off:
            lines.append("<i>At its off value:</i> in the chain but changes nothing.")
        if marked:
            lines.append("Changed from the preset.")
        lines.append("Drag or Alt+Up / Alt+Down to move; double-click to edit.")
        return "<p>" + "<br>".join(lines) + "</p>"

    def _apply_flags(self) -> None:
        base = (
            Qt.ItemFlag.ItemIsSelectable
            | Qt.ItemFlag.ItemIsUserCheckable
            | Qt.ItemFlag.ItemIsDragEnabled
        )
        for i in range(self.list.count()):
            item = self.list.item(i)
            reason = item.data(Qt.ItemDataRole.UserRole + 1)
            flags = base if reason else base | Qt.ItemFlag.ItemIsEnabled
            if item.flags() != flags:
                item.setFlags(flags)

    def _reorder(self, order: Iterable[str]) -> None:
        wanted = [s for s in order if s in STAGES]
        wanted += [s for s in DEFAULT_SAMPLER_ORDER if s not in wanted]
        current = self.list.currentItem()
        current_stage = current.data(Qt.ItemDataRole.UserRole) if current is not None else None
        for dest, stage in enumerate(wanted):
            row = self.row_of(stage)
            if row != dest:
                self.list.model().moveRow(QModelIndex(), row, QModelIndex(), dest)
        if current_stage is not None:
            self.list.setCurrentItem(self.stage_item(current_stage))

    def _maybe_changed(self, *_args) -> None:
        if self._syncing:
            return
        state = (self.order(), self.disabled())
        if state == self._state:
            return
        self._state = state
        self._update_buttons()
        self.changed.emit()

    def _activate(self, item: QListWidgetItem) -> None:
        self.stageActivated.emit(item.data(Qt.ItemDataRole.UserRole))

    def _update_buttons(self) -> None:
        item = self.list.currentItem()
        row = self.list.row(item) if item is not None else -1
        movable = item is not None and bool(item.flags() & Qt.ItemFlag.ItemIsEnabled)
        self.up_button.setEnabled(movable and row > 0)
        self.down_button.setEnabled(movable and row < self.list.count() - 1)

