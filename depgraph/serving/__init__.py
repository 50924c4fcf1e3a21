"""Serving: one engine for every deployment, on the same specs as the event graphs.

An event kernel (:mod:`~depgraph.serving.kernel`: one heap, each kind of
deployment's tie order written once) runs entities with one role each: the
client and the router (:mod:`~depgraph.serving.client`), requests
(:mod:`~depgraph.serving.request`), a KV pool per server
(:mod:`~depgraph.serving.kvpool`), a vLLM engine server
(:mod:`~depgraph.serving.engine`, colocated or prefill-only), the study's
FCFS prefill pool (:mod:`~depgraph.serving.prefill`) and the decode loop
with its posting work (:mod:`~depgraph.serving.decode`). Colocated, xPyD and
the push vs pull study's model are configurations of it
(:mod:`~depgraph.serving.engine`, :mod:`~depgraph.serving.disaggregated`).
Every time it charges comes from the step predictor
(:mod:`depgraph.specs.predictor`).

- :mod:`~depgraph.serving.simulator`: :func:`~depgraph.serving.simulator.loadtest`, the front door.
- :mod:`~depgraph.serving.params`, :mod:`~depgraph.serving.config`: :class:`~depgraph.serving.params.LoadModel` and one
  :func:`~depgraph.serving.config.resolve` into a nested, checked configuration.
- :mod:`~depgraph.serving.results`, :mod:`~depgraph.serving.summary`: one result type,
  :class:`~depgraph.serving.results.LoadResult`, the same summary keys for every deployment.
- :mod:`~depgraph.serving.arrivals`, :mod:`~depgraph.serving.graphs`: traffic in, realised runs out as event graphs.
- :mod:`~depgraph.serving.capacity`: Little's law, handoff bytes and transfer time, and a verdict.
- :mod:`~depgraph.serving.calibrate`: fits to measured ``vllm bench serve`` runs.
- :mod:`~depgraph.serving.plots`, :mod:`~depgraph.serving.text`: figures, and what the commands print.
"""
