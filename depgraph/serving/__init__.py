"""Serving: a second engine on the same specs, the push/pull load test of a decode server.

- :mod:`~depgraph.serving.simulator`: the load test (decode loop, slots, handoff posting).
- :mod:`~depgraph.serving.capacity`: Little's law, handoff bytes and transfer time, and a verdict.
- :mod:`~depgraph.serving.plots`: its figures.
"""
