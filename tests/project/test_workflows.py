"""The GitHub Actions workflows (.github/workflows) pass actionlint, and the release workflow
publishes what the chart's defaults pull: the image ghcr.io/<owner>/carbonshift for amd64
and arm64 with an SBOM and a keyless cosign signature by digest, and the chart as an OCI
artifact under oci://ghcr.io/<owner>/charts.

actionlint comes from hack/build-actionlint.sh (its exact Go module version) into the binary
cache; a missing one is built when Go is installed, else the lint test skips (under CI=true
it fails).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
RELEASE = WORKFLOWS / "release.yml"
CHART = ROOT / "charts" / "carbonshift"
IN_CI = os.environ.get("CI", "").lower() == "true"
BUILD = ROOT / "hack" / "build-actionlint.sh"


def _cache() -> Path:
    cache = os.environ.get("CARBONSHIFT_CACHE")
    return Path(cache).resolve() if cache else ROOT / ".cache" / "bin"


@pytest.fixture(scope="module")
def actionlint() -> Path:
    path = _cache() / "actionlint"
    if not (path.is_file() and os.access(path, os.X_OK)) and shutil.which("go"):
        result = subprocess.run(
            [str(BUILD)], capture_output=True, text=True, check=False, timeout=900, cwd=ROOT
        )
        if result.returncode != 0:
            pytest.fail(f"{BUILD} failed:\n{result.stdout[-3000:]}{result.stderr}")
    if not (path.is_file() and os.access(path, os.X_OK)):
        reason = f"no {path} and no Go to build it ({BUILD})"
        if IN_CI:
            pytest.fail(reason)
        pytest.skip(reason)
    return path


@pytest.mark.timeout(960)
def test_actionlint_passes_on_every_workflow(actionlint: Path) -> None:
    workflows = sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])
    assert workflows, f"no workflow in {WORKFLOWS}"
    result = subprocess.run(
        [str(actionlint), "-no-color", "-oneline", *map(str, workflows)],
        capture_output=True, text=True, check=False, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, f"actionlint:\n{result.stdout}{result.stderr}"


def _release() -> dict[Any, Any]:
    loaded = yaml.safe_load(RELEASE.read_text("utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _steps(job: str) -> list[dict[str, Any]]:
    steps = _release()["jobs"][job]["steps"]
    assert isinstance(steps, list)
    return steps


def _uses(job: str, action: str) -> dict[str, Any]:
    found = [s for s in _steps(job) if str(s.get("uses", "")).startswith(action + "@")]
    assert len(found) == 1, f"job {job}: one step uses {action}"
    return found[0]


def _runs(job: str) -> str:
    return "\n".join(str(step.get("run", "")) for step in _steps(job))


def test_the_release_runs_on_version_tags_only() -> None:
    # PyYAML reads the key `on` as True.
    triggers = _release()[True]
    assert triggers == {"push": {"tags": ["v*"]}}


def test_the_image_is_multi_arch_from_the_dockerfile_with_an_sbom() -> None:
    build = _uses("image", "docker/build-push-action")["with"]
    assert build["file"] == "Dockerfile"
    assert build["context"] == "."
    assert set(build["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert build["push"] is True
    assert build["sbom"] is True
    assert build["tags"] == "${{ steps.names.outputs.image }}:${{ steps.names.outputs.version }}"
    assert "image=ghcr.io/$owner/carbonshift" in _runs("image")
    _uses("image", "docker/setup-qemu-action")
    _uses("image", "docker/setup-buildx-action")
    assert _uses("image", "anchore/sbom-action")["with"]["image"].endswith(
        "@${{ steps.build.outputs.digest }}"
    )


def test_the_image_and_the_chart_are_signed_keyless_by_digest() -> None:
    for job in ("image", "chart"):
        assert _release()["jobs"][job]["permissions"]["id-token"] == "write"
        _uses(job, "sigstore/cosign-installer")
    assert 'cosign sign --yes "${IMAGE}@${DIGEST}"' in _runs("image")
    assert 'cosign sign --yes "$REF"' in _runs("chart")
    assert "--key" not in _runs("image") + _runs("chart")


def test_the_chart_is_pushed_as_an_oci_artifact() -> None:
    runs = _runs("chart")
    assert "helm package charts/carbonshift" in runs
    assert 'helm push "dist/carbonshift-${VERSION}.tgz" "oci://ghcr.io/${owner}/charts"' in runs


def test_the_charts_default_image_is_the_released_one() -> None:
    """values.yaml points at the image this workflow pushes, tagged with the appVersion
    (the tag must equal it, which the workflow's first step checks)."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text("utf-8"))
    values = yaml.safe_load((CHART / "values.yaml").read_text("utf-8"))
    owner = next(
        url.removeprefix("https://github.com/").split("/")[0]
        for url in chart["sources"]
        if url.startswith("https://github.com/")
    )
    assert values["image"]["repository"] == f"ghcr.io/{owner}/carbonshift"
    assert values["image"]["tag"] == ""  # the appVersion
    assert chart["appVersion"] == chart["version"]
    names = next(s for s in _steps("image") if s.get("id") == "names")["run"]
    assert "appVersion" in names
    assert "exit 1" in names
