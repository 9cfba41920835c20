"""Decoding Explorer core: a Qt-free decoding engine for encoder-decoder models.

See DESIGN.md for the picture: backends encode once and step a decoder with a cache;
``core.engine.Engine`` runs a strategy loop and yields plain-data events
(``core.events``); tasks (``core.tasks``) do pre/post-processing per modality.
"""
