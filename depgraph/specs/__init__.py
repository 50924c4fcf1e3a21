"""Specs: what the graph is built from, as data with a source.

- :mod:`~depgraph.specs.models`: model configs as Hugging Face writes them, and the handoff bytes they imply.
- :mod:`~depgraph.specs.hardware`: GPUs and links from datasheets (``data/hardware.json``).
- :mod:`~depgraph.specs.memory`: vLLM's start-up memory budget (KV cache bytes, blocks, tokens), fitted to vLLM logs
  (``data/measured/``).
- :mod:`~depgraph.specs.cost`: the cost model, every assumption a named parameter (and how a calibration applies).
- :mod:`~depgraph.specs.predictor`: the step predictor, every duration a serving engine charges.
- :mod:`~depgraph.specs.parallel`, :mod:`~depgraph.specs.routing`: ranks and shards; MoE expert routing.
- :mod:`~depgraph.specs.calibration`: a saved calibration, read strictly.

Specs import nothing from the core.
"""
