"""Files and pictures: graph files, Perfetto traces, drawings, and files written whole.

- :mod:`~depgraph.io.graphfile`: event graphs from and to GraphML and node-link JSON.
- :mod:`~depgraph.io.perfetto`: a schedule as a Perfetto / Chrome trace.
- :mod:`~depgraph.io.draw`: graphviz drawings, timelines and frontier plots.
- :mod:`~depgraph.io.atomic`: every file depgraph writes, whole or not at all.
"""

from .graphfile import MAX_GRAPH_FILE_BYTES, MAX_GRAPH_NODES, read_graph, write_graph

__all__ = ["MAX_GRAPH_FILE_BYTES", "MAX_GRAPH_NODES", "read_graph", "write_graph"]
