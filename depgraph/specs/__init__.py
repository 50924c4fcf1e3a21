"""Specs: what the graph is built from, as data with a source.

- :mod:`~depgraph.specs.models`: model configs as Hugging Face writes them, and the handoff bytes they imply.
- :mod:`~depgraph.specs.hardware`: GPUs and links from datasheets (``data/hardware.json``).
- :mod:`~depgraph.specs.cost`: the cost model, every assumption a named parameter.

Specs import nothing from the core.
"""
