"""``python -m bench``: every benchmark, results into bench/results/ and README."""

from __future__ import annotations

from bench import admission, score


def main() -> None:
    admission.main()
    score.main()


if __name__ == "__main__":
    main()
