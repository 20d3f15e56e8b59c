"""Developer tools for working on carbonshift; not part of the carbonshift package.

Nothing here is installed with carbonshift: ``pyproject.toml`` packages ``webhook*`` only.
"""
