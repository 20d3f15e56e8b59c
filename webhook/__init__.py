"""carbonshift: carbon-aware placement for Kubernetes fleets.

The package is layered: ``intensity`` and ``decision`` are pure (data in, decision
out); ``admission`` turns AdmissionReviews into decisions and JSON patches; the
``server``, ``feed``, ``providers`` and ``cli`` modules are the I/O edges.
"""

__version__ = "0.1.0"

PREFIX = "carbonshift.io/"
"""Key prefix of every label and annotation carbonshift reads or writes."""
