"""``python -m bench``: every benchmark, results into bench/results/ and README."""

from __future__ import annotations

from bench import admission


def main() -> None:
    admission.main()


if __name__ == "__main__":
    main()
