"""Semantic invariants of what carbonshift writes, checked on real upstream objects."""
