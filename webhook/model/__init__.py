"""The model: types, the ``carbonshift.io`` vocabulary, the configuration and validation.

No I/O beyond reading the configuration and the trace files.
"""
