"""The installed PySide6 must not leak references to True/False when a signal is emitted.

PySide6 6.12.0 (with Python 3.11, where True/False are not immortal) drops one
reference to a bool per emission of a signal carrying it; pyqtgraph emits such
signals on every view-range change, so after a few thousand the interpreter aborts
("bool_dealloc: deallocating True or False"). 6.11.3 is fine. Pin around it.
"""

import sys

from PySide6.QtCore import QObject, Signal


class _Emitter(QObject):
    flag = Signal(bool)
    pair = Signal(object, object)


def test_signal_emission_keeps_bool_refcounts(qapp):
    e = _Emitter()
    e.flag.connect(lambda x: None)
    e.pair.connect(lambda a, b: None)
    before = sys.getrefcount(True), sys.getrefcount(False)
    for _ in range(200):
        e.flag.emit(True)
        e.flag.emit(False)
        e.pair.emit(True, False)
    after = sys.getrefcount(True), sys.getrefcount(False)
    # a handful of references may come and go elsewhere; a leak loses >= 200 of each
    assert abs(after[0] - before[0]) < 50 and abs(after[1] - before[1]) < 50, (before, after)
