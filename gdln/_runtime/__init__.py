"""Where and how gdln's work runs, apart from what it computes.

The machinery that :func:`gdln.simulate` and :func:`gdln.compare` share, on the ground
floor (only the standard library, :mod:`gdln._errors` and, on first use, threadpoolctl), so that the domain code uses
it and it knows nothing of the domain:

* ``_threads``: how many CPU threads a torch run takes, and whether its singular values
  are computed on a second thread beside the training;
* ``_blas``: one BLAS thread for numpy's and scipy's small dense calls
  (:func:`_blas.one_blas_thread`, :func:`_blas.blas_threads`);
* ``_worker``: a second Python process that imports a heavy library once and then runs
  the jobs it is sent, the lowest priority number first (:class:`_worker.Worker`), and one
  started ahead of the work (:func:`_worker.standby`);
* ``_jobs``: a batch of jobs run in such a process where that can overlap the caller's own
  work, else here (:class:`_jobs.Jobs`);
* ``_fork``: jobs that write files, run at the same time in forked children
  (:func:`_fork.side_by_side`: the figures of a comparison).

A process runs a *target*, a function named ``"package.module:function"`` by the code that
uses it (never read from a file): the worker imports it when it starts.
"""
