"""The core: the event graph, readiness policies and the scheduler.

- :mod:`~depgraph.core.graph`: node and edge kinds, building and validating an event graph (networkx).
- :mod:`~depgraph.core.policies`: readiness policies, rules that add ``policy`` edges.
- :mod:`~depgraph.core.table`: the compiled form of a graph (:class:`~depgraph.EventTable`), and its caches.
- :mod:`~depgraph.core.scheduler`: start and finish times, and the analyses over a schedule.
- ``_kernel``: the array loops the scheduler runs.

The core knows nothing of models, hardware or workloads: it imports only
:mod:`depgraph.errors` and :mod:`depgraph._validate`.
"""
