"""A Dask cluster on this machine, set up the way numpy-heavy trials need.

``teachgrad.tune`` takes any ``concurrent.futures.Executor``; Dask distributed's
``client.get_executor()`` is one. On many machines you would connect a
``Client("tcp://scheduler:8786")``; on one machine a ``LocalCluster`` does::

    with tune.local_dask_client(n_workers=2) as client:
        result = tune.hyperband(objective, space, 81, executor=client.get_executor())

One setting matters: Dask's nanny starts each worker with
``MALLOC_TRIM_THRESHOLD_=65536``, which makes glibc hand memory back to the OS so
eagerly that a numpy-heavy trial ran 5-7x slower on this project's machine. We
remove that variable from the workers' environment before the cluster starts.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

MALLOC_TRIM_KEY = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"


@contextmanager
def local_dask_client(n_workers: int = 2, threads_per_worker: int = 1, **cluster_kwargs: Any) -> Iterator[Any]:
    """A ``dask.distributed.Client`` on a ``LocalCluster`` of worker processes, closed on exit.

    Needs the ``tune`` extra: ``pip install "teachgrad[tune]"``.
    """
    if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
        raise ValueError(f"n_workers must be a positive int, got {n_workers!r}")
    try:
        import dask
        from dask.distributed import Client, LocalCluster
    except ImportError as err:  # pragma: no cover - the extra is installed in CI
        raise ImportError("Dask is not installed. Fix: pip install \"teachgrad[tune]\" "
                          "(or pip install \"dask[distributed]\")") from err
    with dask.config.set({MALLOC_TRIM_KEY: None}):
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                               processes=True, dashboard_address=None, **cluster_kwargs)
    try:
        with Client(cluster) as client:
            yield client
    finally:
        cluster.close()
