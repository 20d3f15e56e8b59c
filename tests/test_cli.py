"""The carbonshift command line."""

from __future__ import annotations

import base64
import io
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml
from cryptography import x509

from webhook.cli import main

PP = """\
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: web, namespace: shop}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
  placement:
    replicaScheduling: {replicaSchedulingType: Divided}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: np
  labels: {carbonshift.io/enabled: "true"}
  annotations: {carbonshift.io/strategy: pause}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
  limits: {cpu: "64"}
"""

CONFIG = "zone: PL\nclusters:\n  member-fr: {zone: FR}\n  member-pl: {zone: PL}\n"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_help_lists_every_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "webhook.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for command in ("serve", "certs", "mutate"):
        assert command in out


def test_mutate_prints_what_would_be_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m.yaml").write_text(PP)
    (tmp_path / "c.yaml").write_text(CONFIG)
    code, out, _ = run(
        capsys, "mutate", "-f", str(tmp_path / "m.yaml"), "--config", str(tmp_path / "c.yaml")
    )
    assert code == 0
    docs = list(yaml.safe_load_all(out))
    weights = docs[0]["spec"]["placement"]["replicaScheduling"]["weightPreference"]
    assert weights["staticWeightList"][0]["targetCluster"]["clusterNames"] == ["member-fr"]
    assert docs[1]["spec"]["limits"] == {"cpu": "0"}
    assert "# carbonshift: PropagationPolicy web: patched" in out


def test_mutate_json_output_and_stdin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(PP))
    (tmp_path / "c.yaml").write_text(CONFIG)
    code, out, _ = run(
        capsys, "mutate", "-f", "-", "-o", "json", "--config", str(tmp_path / "c.yaml")
    )
    assert code == 0
    results = orjson.loads(out)
    assert [r["outcome"] for r in results] == ["patched", "patched"]
    assert results[1]["decision"]["class"] == "high"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("zone: [", "c.yaml: not valid YAML at line 1"),
        ("providers: [nope]\n", "carbonshift: config error: providers[0]: unknown provider 'nope'"),
        (
            "feed: {retries: -1}\n",
            "carbonshift: config error: feed.retries: expected int >= 0, got -1",
        ),
    ],
)
def test_bad_config_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, message: str
) -> None:
    (tmp_path / "c.yaml").write_text(config)
    (tmp_path / "m.yaml").write_text(PP)
    code, _, err = run(
        capsys, "mutate", "-f", str(tmp_path / "m.yaml"), "--config", str(tmp_path / "c.yaml")
    )
    assert code == 2
    assert message in err
    assert err.count("\n") == 1


def test_mutate_names_documents_it_cannot_read_and_shows_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = "metadata: {name: x}\n---\nkind: [unclosed\n---\n"
    (tmp_path / "m.yaml").write_text(broken + PP)
    code, out, err = run(capsys, "mutate", "-f", str(tmp_path / "m.yaml"))
    assert code == 1
    problems = err.splitlines()
    assert problems[0].endswith("m.yaml: document 1: needs apiVersion and kind; skipped")
    assert "m.yaml: document 2: not valid YAML or JSON" in problems[1]
    assert len(problems) == 2
    assert "# carbonshift: PropagationPolicy" in out  # document 3 was still decided


def test_mutate_warns_for_api_versions_the_webhook_does_not_register(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: old}\nspec: {}\n"
    (tmp_path / "m.yaml").write_text(old)
    code, out, _ = run(capsys, "mutate", "-f", str(tmp_path / "m.yaml"))
    assert code == 0
    assert "# carbonshift: NodePool old: ignored" in out
    assert (
        "NodePool karpenter.sh/v1beta1 is not mutated; the webhook handles karpenter.sh/v1" in out
    )


def test_mutate_reports_a_malformed_object_and_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: 7}\n"
    (tmp_path / "m.yaml").write_text(odd + "---\n" + PP)
    (tmp_path / "c.yaml").write_text(CONFIG)
    code, out, _ = run(
        capsys, "mutate", "-f", str(tmp_path / "m.yaml"), "-o", "json",
        "--config", str(tmp_path / "c.yaml"),
    )  # fmt: skip
    assert code == 0
    first, *others = orjson.loads(out)
    assert first["outcome"] == "invalid"
    assert "request.name" in first["reason"]
    assert others[0]["outcome"] == "patched"


def test_certs_writes_a_bundle_and_prints_the_ca(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "certs",
        "--service",
        "carbonshift",
        "--namespace",
        "ops",
        "--ip",
        "127.0.0.1",
        "--out",
        str(tmp_path),
    )
    assert code == 0
    assert base64.b64decode(out.strip()) == (tmp_path / "ca.crt").read_bytes()
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "carbonshift.ops.svc" in sans.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert (tmp_path / "tls.key").stat().st_mode & 0o077 == 0


def test_mutate_reevaluate_shows_what_the_leader_would_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Objects as stored, put through the leader's re-evaluation: the grid under member-fr
    and member-pl swapped since admission (no dwell), so the policy switches (history
    recorded) and the paused NodePool stays paused."""
    (tmp_path / "m.yaml").write_text(PP)
    (tmp_path / "c.yaml").write_text(CONFIG)
    code, stored, _ = run(
        capsys, "mutate", "-f", str(tmp_path / "m.yaml"), "--config", str(tmp_path / "c.yaml")
    )
    assert code == 0
    (tmp_path / "stored.yaml").write_text(stored)
    swapped = (
        "zone: PL\nhysteresis: {dwell_hours: 0}\n"
        "clusters:\n  member-fr: {zone: PL}\n  member-pl: {zone: FR}\n"
    )
    (tmp_path / "later.yaml").write_text(swapped)
    args = ["-f", str(tmp_path / "stored.yaml"), "--config", str(tmp_path / "later.yaml")]
    code, out, _ = run(capsys, "mutate", "--reevaluate", "-o", "json", *args)
    assert code == 0
    policy, pool = orjson.loads(out)
    assert policy["outcome"] == "switched"
    assert "greener than the placement in force" in policy["reason"]
    weights = policy["object"]["spec"]["placement"]["replicaScheduling"]["weightPreference"]
    assert weights["staticWeightList"][0]["targetCluster"]["clusterNames"] == ["member-pl"]
    (switch,) = policy["decision"]["switches"]
    assert switch["before"] > switch["after"]
    assert pool["outcome"] == "kept"
    assert pool["object"]["spec"]["limits"] == {"cpu": "0"}
    code, text, _ = run(capsys, "mutate", "--reevaluate", *args)
    assert "# carbonshift: PropagationPolicy web: switched" in text
    assert "# carbonshift: NodePool np: kept" in text


def test_mutate_reevaluate_leaves_kinds_it_does_not_follow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    code, out, _ = run(
        capsys, "mutate", "--reevaluate", "-o", "json", "-f", str(tmp_path / "m.yaml")
    )
    assert code == 0
    (result,) = orjson.loads(out)
    assert result["outcome"] == "ignored"
    assert result["reason"] == "v1 ConfigMap is not re-evaluated"
