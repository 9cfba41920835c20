"""``decoding-explorer sweep``: decoding strategies scored over a whole data set (issue 24).

Qt-free. The parts, each usable alone:

- :mod:`core.sweep.data`: the data readers (a folder of audio files or images with a same-stem
  ``.txt`` reference, a TSV ``source<TAB>reference`` for translation, a ``datasets`` data set
  saved to disk) giving :class:`~core.sweep.data.Item` s with their input hash;
- :mod:`core.sweep.specs`: strategy specs in the lanes' grammar plus seed ranges (``seed=0..4``);
- :mod:`core.sweep.decode`: one file, every strategy, on one encoder pass per segment (the
  task model's ``decode_lanes``): one row and one JSON trace per strategy x seed;
- :mod:`core.sweep.results`: ``results.parquet`` (appended as rows arrive, resumable by
  input hash x options hash) and the gzipped traces;
- :mod:`core.sweep.stats`: metric per strategy with a 95% bootstrap CI over files, paired
  comparison against a baseline (sign test, paired bootstrap), hallucination signals;
  ``summary.md`` / ``summary.json``;
- :mod:`core.sweep.ray_runner`: the sweep on Ray (a local instance by default, or a cluster),
  one actor per worker that loads the model once and decodes batches of files.
"""
