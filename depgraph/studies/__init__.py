"""Studies: the two studies depgraph reproduces, and ``depgraph reproduce``.

- :mod:`~depgraph.studies.single`: the single-request study (bytes, gains by policy).
- :mod:`~depgraph.studies.replay`: the workload replay (Figures 6 to 9).
- :mod:`~depgraph.studies.gallery`: small drawings of each workload (Figure 5).
- :mod:`~depgraph.studies.claims`: every study figure next to ours, with its tolerance.
- :mod:`~depgraph.studies.report`: ``report.md``.
- :mod:`~depgraph.studies.reproduce`: both studies into one folder.
- ``scenarios/``: the scenario files the studies run (``workloads/`` in the source tree).
"""
