"""``python -m devtools.sandbox up|down|status`` (``make sandbox``, ``make sandbox-down``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from devtools.sandbox.control_plane import Sandbox
from devtools.sandbox.layout import LOOPBACK, Layout, SandboxError
from devtools.sandbox.pki import KARMADA_CONTEXT
from devtools.sandbox.workload import WorkloadCluster, workload_layout
from webhook.model.validation import InvalidInput, read_yaml


def _print_next_steps(sandbox: Sandbox, workload: WorkloadCluster | None) -> None:
    bin_dir = sandbox.kubectl_binary().parent
    first = sandbox.members[0]
    print()
    print("Sandbox is up. Try it:")
    print(f"  export KUBECONFIG={sandbox.kubeconfig} PATH={bin_dir}:$PATH")
    print(f"  kubectl apply -f {sandbox.layout.root / 'examples'}/")
    print(f"  kubectl --context {first} -n carbonshift-demo get deployments")
    carbonshift = sandbox.layout.root / ".venv" / "bin" / "carbonshift"
    print("  # carbon accounting, after the leader's first pass (accounting.interval_seconds):")
    print(f"  {carbonshift} report --kubeconfig {sandbox.kubeconfig}")
    print()
    print(f"Contexts: {KARMADA_CONTEXT} (current, the Karmada API server), "
          + ", ".join(f"{m} ({sandbox.member_url(m)})" for m in sandbox.members))  # fmt: skip
    print(f"carbonshift: {sandbox.carbonshift_url} (logs: {sandbox.layout.state / 'logs'})")
    stock = (
        "" if sandbox.karmada.plugin else " (its stock karmada-scheduler, no carbonshift plugin)"
    )
    print(f"Karmada {sandbox.karmada.version}{stock}")
    if workload is not None:
        print("Karpenter workload cluster (NodePools; Karpenter launches KWOK nodes):")
        print(f"  kubectl --kubeconfig {workload.kubeconfig} get nodepools,nodeclaims,nodes")
    print("Stop it with: make sandbox-down (python -m devtools.sandbox down)")


def _status(sandbox: Sandbox, workload: WorkloadCluster) -> int:
    alive = sandbox.running()
    for name in sandbox.known_components():
        pid = alive.get(name)
        print(f"{name:16} {'running, pid ' + str(pid) if pid else 'stopped'}")
    for name, running in workload.running().items():
        print(f"{'workload ' + name:16} running, pid {running}")
    if alive and sandbox.layout.state_file.is_file():
        state = json.loads(sandbox.layout.state_file.read_text(encoding="utf-8"))
        print(f"kubeconfig       {state['kubeconfig']}")
        if "karmada" in state:
            print(f"karmada          {state['karmada']}")
        print(f"carbonshift      https://{LOOPBACK}:{state['ports']['carbonshift']}")
        for member in sandbox.members:
            print(f"{member:16} https://{LOOPBACK}:{state['ports'][f'{member}-apiserver']}")
    return 0 if alive else 3


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m devtools.sandbox",
        description="Local Karmada control plane (etcd, kube-apiserver, Karmada/Karpenter "
        "CRDs, karmada-controller-manager, karmada-scheduler with the carbonshift plugin, "
        "karmada-webhook, carbonshift) and three member clusters joined in Push mode, on "
        "127.0.0.1, for trying carbonshift with kubectl apply. A development tool: not "
        "installed with carbonshift.",
        epilog="Exit status: 0 success, 1 a component failed, 2 bad usage; "
        "status: 3 when nothing runs.",
    )
    p.add_argument(
        "command",
        choices=("up", "down", "status"),
        help="up: start everything and print how to use it; down: stop every process it "
        "started and remove its state; status: what runs",
    )
    p.add_argument("--state-dir", type=Path, default=None, help="state folder (default: .sandbox)")
    p.add_argument(
        "--no-karmada-webhook",
        action="store_true",
        help="do not run karmada-webhook (policies are then stored without Karmada's "
        "defaults, and Karmada neither schedules bindings nor applies Works correctly)",
    )
    p.add_argument(
        "--no-karpenter",
        action="store_true",
        help="do not start the Karpenter workload cluster (its own API server, "
        "kube-controller-manager, kube-scheduler, KWOK, the Karpenter kwok provider and a "
        "carbonshift deciding its NodePools; about 700 MB)",
    )
    p.add_argument(
        "--karmada",
        default=None,
        metavar="VERSION",
        help="the Karmada release of the control plane (default: the one hack/tools/go.mod "
        "pins, with carbonshift's scheduler plugin); another one a hack/karmada-*/go.mod pins "
        "(v1.16.0) runs its stock karmada-controller-manager, karmada-webhook and "
        "karmada-scheduler and its CRDs (make binaries builds them)",
    )
    p.add_argument(
        "--config",
        type=Path,
        default=os.environ.get("SANDBOX_CONFIG") or None,
        metavar="FILE",
        help="a carbonshift config laid over the sandbox's, section by section (default: "
        "$SANDBOX_CONFIG); its clusters: map is ignored (members are discovered), provider "
        "credentials come from the environment (e.g. ELECTRICITY_MAPS_API_TOKEN)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    layout = Layout.default(args.state_dir)
    try:
        sandbox = Sandbox(
            layout,
            with_karmada_webhook=not args.no_karmada_webhook,
            user_config=None if args.config is None else Path(args.config),
            karmada=args.karmada,
        )
        user = {} if args.config is None else read_yaml(Path(args.config))
        workload = WorkloadCluster(
            workload_layout(layout), carbonshift_config=user if isinstance(user, dict) else {}
        )
        if args.command == "up":
            sandbox.up()
            if not args.no_karpenter:
                try:
                    workload.up()
                except BaseException:
                    sandbox.down(keep_state=True)
                    raise
            _print_next_steps(sandbox, None if args.no_karpenter else workload)
        elif args.command == "down":
            workload.down()  # first: its state lives inside the sandbox's
            sandbox.down()
            print("Sandbox stopped.")
        else:
            return _status(sandbox, workload)
    except (SandboxError, InvalidInput) as exc:
        print(f"sandbox: {exc}", file=sys.stderr)
        return 1
    return 0
