"""Independent reference computations for gdln's tests.

Nothing here imports gdln: these modules are what the code under test is compared
against, written from the papers' equations in plain numpy/scipy/torch. Import them from a
test as ``from reference import gated_flow`` (pytest puts ``tests/`` on ``sys.path``).
See ``tests/reference/README.md`` for what each module computes and ``FACTS.md`` for the
facts taken from the papers' code.
"""
