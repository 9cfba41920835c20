"""The sweep on Ray: one actor per worker loads the model once and decodes batches of files;
results stream back as each batch is done (``ray.wait``) and are stored at once.

- No address: a local Ray instance (``ray.init(num_cpus=CORES, include_dashboard=False)``,
  quiet; its CPUs split between the workers, each worker with 1 torch thread), shut
  down at the end; a Ray already initialised in this process is used as it is.
  Its logs are linked from the out folder as ``ray-logs``.
- ``address="auto"`` or ``"ray://HOST:PORT"``: an existing cluster (its workers need this
  package installed); rows and traces come back to the local out folder.
- A worker that dies (killed, out of memory, its node lost) loses only its unfinished batch:
  the batch is queued again and a new worker takes its place (at most ``workers`` times).
- Ctrl+C stops the workers; what was stored stays (the sweep resumes from it).
- In a process where Ray was already initialised (a notebook, the tests), the workers stay up
  after a sweep and the next sweep of the same task and settings reuses them (no second model
  load); with a Ray this module started, they end with it.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections import deque
from typing import Callable, TextIO

#: one line that says how to get Ray (the CLI prints it and exits 2 when ray is missing)
INSTALL_HINT = "decoding-explorer sweep runs on Ray: pip install -e '.[sweep]' (or: pip install 'ray[default]' pyarrow)"

_WORKER_CLASS = None
#: (Ray job id, task, settings, threads) -> the live workers kept from the last sweep in a Ray this module did
#: not start (one entry at most: kept workers hold their CPUs)
_POOLS: dict[tuple, list] = {}


def worker_class():
    """The Ray actor class (made once; ray imported here, not at module import).

    The actor ``SweepWorker(task, settings, threads)`` sets torch's thread count, loads the
    model (``core.sweep.decode.FileDecoder``) and has ``ready()`` (its host:pid) and
    ``decode_batch(batch)`` (a list of ``Decoded``)."""
    global _WORKER_CLASS
    if _WORKER_CLASS is None:
        import ray

        class SweepWorker:
            def __init__(self, task, settings, threads):
                import torch

                from core.sweep.decode import FileDecoder

                torch.set_num_threads(max(1, int(threads)))
                self.decoder = FileDecoder(task, settings)

            def ready(self):
                return self.decoder.worker

            def decode_batch(self, batch):
                return self.decoder.decode_batch(batch)

        _WORKER_CLASS = ray.remote(max_restarts=0, max_task_retries=0)(SweepWorker)
    return _WORKER_CLASS


def start_ray(address: str | None, workers: int | None, out, err: TextIO) -> tuple[bool, int, float, int]:
    """Connect to Ray: a local instance when ``address`` is None (``num_cpus`` = the cores, or
    ``workers`` when more), else the cluster at ``address``; a Ray already initialised is used.

    Returns:
        (whether this call started Ray, so it shuts it down; the workers to run, default the
        CPUs; the CPUs each worker reserves; its torch threads). A local instance splits its
        CPUs between the workers (2 cores, 1 worker: 2 CPUs); on a Ray started elsewhere each
        worker reserves 1 CPU (a fraction when there are more workers than CPUs, so no worker
        waits forever). Every worker runs 1 torch thread: a batch-1 decode step gains little
        from a second thread, and two threads per worker spun against Ray's own processes
        (tests/bench/bench_sweep.py, 8 files, 1 worker on 2 cores: 1 thread 24.9 s, 2 threads
        125.5 s); a sweep's parallelism is its workers.
    """
    import ray

    started = False
    cores = os.cpu_count() or 1
    if not ray.is_initialized():
        kwargs = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
                      configure_logging=True)
        if address is None:
            ray.init(num_cpus=max(cores, workers or cores), **kwargs)
        else:
            ray.init(address=address, **kwargs)
        started = True
        _link_logs(out)
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    workers = max(1, workers or cpus)
    if started and address is None:
        return started, workers, float(max(1, cpus // workers)), 1
    return started, workers, min(1.0, cpus / workers), 1


def _link_logs(out) -> None:
    """``OUT/ray-logs`` -> this Ray session's log folder (where a worker's traceback is)."""
    try:
        import ray

        logs = ray._private.worker.global_worker.node.get_logs_dir_path()  # local sessions only
        link = os.path.join(out, "ray-logs")
        if os.path.islink(link):
            os.unlink(link)
        if not os.path.exists(link):
            os.symlink(logs, link)
    except Exception:  # a client connection (ray://) has no local node; nothing to link
        pass


def batch_size(n_files: int, workers: int, asked: int | None) -> int:
    """Files per batch: ``asked``, else at most 8 with about 4 batches per worker (so a dead
    worker loses little and the progress bar moves)."""
    if asked is not None:
        if asked < 1:
            raise ValueError(f"--batch-size must be at least 1, got {asked}")
        return asked
    return max(1, min(8, math.ceil(n_files / (workers * 4))))


def decode_on_ray(config, todo: list, store, report, *, err: TextIO | None = None,
                  on_batch: Callable[[int, list], None] | None = None) -> None:
    """Decode ``todo`` (``(item, runs)`` per file) on Ray workers, storing each batch's rows in
    ``store`` as it arrives; counts in ``report`` (decoded, rows, restarts, interrupted).

    Raises:
        ImportError: ray is not installed.
        RuntimeError: no worker could load the model (its error), or every worker died.
    """
    import ray
    from ray.exceptions import RayActorError, RayTaskError

    err = err or sys.stderr
    started, workers, cpus, threads = start_ray(config.address, config.workers, config.out, err)
    size = batch_size(len(todo), workers, config.batch_size)
    queue = deque(todo[i:i + size] for i in range(0, len(todo), size))
    n_workers = min(workers, len(queue))
    Worker = worker_class()

    def new_worker():
        return Worker.options(num_cpus=cpus).remote(config.task, config.settings, threads)

    key = (ray.get_runtime_context().get_job_id(), config.task, repr(config.settings), cpus, threads)
    kept = [] if started else _POOLS.pop(key, [])
    _kill([a for pool in _POOLS.values() for a in pool])  # workers of other settings: free their CPUs
    _POOLS.clear()
    actors = kept[:n_workers] + [new_worker() for _ in range(n_workers - len(kept))]
    spare = kept[n_workers:]
    inflight: dict = {}
    finished = False
    bar = None
    try:
        if config.progress:
            reused = min(len(kept), n_workers)
            load = f"loading {config.settings.model} in {n_workers - reused} worker(s)" if n_workers > reused else ""
            reuse = f"{reused} worker(s) kept from the last sweep" if reused else ""
            print(f"sweep: {', '.join(x for x in (load, reuse) if x)}; {len(todo)} files to decode", file=err,
                  flush=True)
        loaded = []
        for a in actors:  # the model loads in every worker at once; a load error is the user's to see
            try:
                ray.get(a.ready.remote())
                loaded.append(a)
            except (RayActorError, RayTaskError) as e:
                last = e
        if not loaded:
            raise RuntimeError(f"no sweep worker could load the model: {_cause(last)}")
        actors = loaded
        bar = _progress(len(todo), config.progress, err)

        def give(actor) -> None:
            if queue:
                batch = queue.popleft()
                inflight[actor.decode_batch.remote(batch)] = (actor, batch)

        for a in actors:
            give(a)
        while inflight:
            ready, _ = ray.wait(list(inflight), num_returns=1)
            for ref in ready:
                actor, batch = inflight.pop(ref)
                try:
                    results = ray.get(ref)
                except RayActorError:  # the worker died: its batch goes back, a new worker takes its place
                    queue.appendleft(batch)
                    actors.remove(actor)
                    if report.restarts < workers:
                        report.restarts += 1
                        fresh = new_worker()
                        actors.append(fresh)
                        give(fresh)
                    elif not actors:
                        raise RuntimeError("every sweep worker died; see ray-logs in the out folder") from None
                    continue
                except RayTaskError as e:  # a fault in the decoding code itself: these files fail
                    from core.sweep.decode import Decoded

                    why = _cause(e)
                    results = [Decoded(row={"file": it.id, "spec": r.spec, "seed": r.seed,
                                            "input_hash": it.input_hash, "options_hash": h, "error": why}, error=why)
                               for it, runs in batch for r, h in runs]
                report.rows += store.append(results)
                report.decoded += len(batch)
                bar.update(len(batch))
                if on_batch is not None:
                    on_batch(report.decoded, list(actors))
                give(actor)
            if queue and not inflight and actors:
                for a in actors:
                    give(a)
        finished = True
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        if bar is not None:
            bar.close()
        if report.interrupted:
            print(f"sweep: interrupted; {report.decoded} of {len(todo)} files stored in {config.out} "
                  "(run the same command again to resume)", file=err, flush=True)
        if finished and not started:  # idle and alive: the next sweep of the same settings reuses them
            _POOLS[key] = actors + spare
        else:
            _kill(actors + spare)
        if started:
            ray.shutdown()


def _kill(actors: list) -> None:
    import ray

    for a in actors:
        try:
            ray.kill(a)
        except Exception:  # already dead, or a handle from an earlier Ray session
            pass


def _cause(e: BaseException) -> str:
    """The first line that says what went wrong inside a worker."""
    text = str(getattr(e, "cause", None) or e)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "Error:" in ln]
    return (errors[-1] if errors else lines[-1] if lines else type(e).__name__).strip()


def _progress(total: int, enabled: bool, err: TextIO):
    """A tqdm bar on ``err``: files done / total, ETA, files per second."""
    from tqdm import tqdm

    return tqdm(total=total, unit="file", desc="sweep", file=err, disable=not enabled, dynamic_ncols=True,
                smoothing=0.3)
