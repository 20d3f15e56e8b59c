"""The decision core: pure functions, no I/O. Data in, decision out.

The admission webhook, the scheduler filter/score API, ``carbonshift mutate`` and the
simulator all call these functions; none of them has a ranking of its own.
"""
