"""Test-suite settings shared by every test module.

Hypothesis runs deterministically (``derandomize=True``: the examples are a
function of the test and of the code it imports (hypothesis also draws constants
from local modules), so the same suite gives the same examples on every machine
and every run; running one file alone may draw different ones)
and without a deadline (the first call of a test pays for imports and graph
construction, which would trip a per-example deadline on a slow CI box).
``max_examples`` is kept modest so that the whole suite stays fast on two
cores; tests that build full request graphs lower it further with their own
``@settings``. Set ``DEPGRAPH_HYPOTHESIS_PROFILE=thorough`` for a long,
still deterministic run.
"""

import os

from hypothesis import settings

settings.register_profile("depgraph", derandomize=True, deadline=None, max_examples=40, database=None, print_blob=True)
settings.register_profile("thorough", parent=settings.get_profile("depgraph"), max_examples=1000)
settings.load_profile(os.environ.get("DEPGRAPH_HYPOTHESIS_PROFILE", "depgraph"))
