"""Command line for the local cluster: ``python -m localcluster up|down|status|env|build``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from localcluster import build, sidecars
from localcluster.launcher import DEFAULT_API_PORT, DEFAULT_STATE_DIR, ClusterConfig, ClusterError, LocalCluster


def _sidecar_option(text: str) -> tuple[str, dict[str, str]]:
    try:
        return sidecars.parse_sidecar_option(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "status", "env", "build"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_STATE_DIR, help="state directory of this cluster")
    parser.add_argument("--api-port", type=int, default=DEFAULT_API_PORT,
                        help="API server port; the cluster uses the next twelve too (etcd, controller-manager, "
                             "scheduler, the nodes' log endpoints, Prometheus at +6, metrics endpoints)")
    parser.add_argument("--nodes", type=int, default=3, help="simulated nodes")
    parser.add_argument("--max-volumes-per-node", type=int, default=128,
                        help="the simulated driver's per-node volume limit (CSINode allocatable.count)")
    parser.add_argument("--sidecar", type=_sidecar_option, action="append", default=[],
                        metavar="COMPONENT:FLAG=VALUE[,FLAG=VALUE]",
                        help=f"flags for one of {', '.join(sidecars.SIDECAR_NAMES)}, e.g. "
                             "snapshot-controller:kube-api-qps=100,kube-api-burst=200 (repeatable)")
    parser.add_argument("--sidecar-timeout", metavar="DURATION|PROFILE",
                        help="--timeout of every sidecar that makes CSI calls (csi-provisioner, csi-attacher, "
                             "csi-snapshotter, csi-resizer), e.g. 600s, or a vendor's deployment: "
                             f"{', '.join(f'{k} ({v})' for k, v in sidecars.VENDOR_PROFILES.items())}; a --sidecar "
                             "option that sets a component's timeout wins")
    parser.add_argument("--standby", choices=sidecars.SIDECAR_NAMES, action="append", default=[],
                        metavar="COMPONENT",
                        help="run a second replica of this sidecar, its pod on the second node: a standing "
                             "candidate for its leader Lease, as in a two-replica Deployment (repeatable)")
    parser.add_argument("--upstream-sidecar-defaults", action="store_true",
                        help="start the sidecars with upstream's client limits (QPS 5 / burst 10) instead of the "
                             "raised 500/1000")
    parser.add_argument("--no-prometheus", action="store_true",
                        help="start no Prometheus (by default one scrapes the sidecars and the simulator every "
                             "second, at http://127.0.0.1:<api port + 6>)")
    parser.add_argument("--scrape-control-plane", action="store_true",
                        help="Prometheus also scrapes the API server and the controller-manager every 5 s (jobs "
                             "apiserver and kube-controller-manager: list latency, stored objects, the PV "
                             "controller's queues, memory)")
    args = parser.parse_args(argv)
    sidecar_flags: dict[str, dict[str, str]] = {}
    for component, flags in args.sidecar:
        sidecar_flags.setdefault(component, {}).update(flags)
    if args.sidecar_timeout:
        try:
            sidecar_flags = sidecars.timeout_flags(args.sidecar_timeout, sidecar_flags)
        except ValueError as error:
            parser.error(str(error))
    if args.command == "build":
        build.main([])
        return 0
    state_port = _recorded_port(args.dir)
    api_port = state_port if state_port and args.command != "up" else args.api_port
    cluster = LocalCluster(ClusterConfig(state_dir=args.dir.resolve(), api_port=api_port, nodes=args.nodes,
                                         max_volumes_per_node=args.max_volumes_per_node,
                                         sidecar_flags=sidecar_flags,
                                         upstream_sidecar_defaults=args.upstream_sidecar_defaults,
                                         standby_sidecars=tuple(args.standby),
                                         prometheus=not args.no_prometheus,
                                         scrape_control_plane=args.scrape_control_plane))
    if args.command == "up":
        started = time.monotonic()
        if cluster.running():
            print(f"already running at {cluster.config.server}", file=sys.stderr)
        else:
            try:
                cluster.up()
            except ClusterError as error:
                print(f"local cluster failed to start: {error}", file=sys.stderr)
                return 1
            print(f"ready in {time.monotonic() - started:.1f}s at {cluster.config.server}", file=sys.stderr)
            if cluster.config.prometheus:
                print(f"prometheus at {cluster.config.prometheus_url}", file=sys.stderr)
        print(cluster.env())
    elif args.command == "down":
        cluster.down()
        print("stopped", file=sys.stderr)
    elif args.command == "status":
        print(json.dumps(cluster.status(), indent=2))
        return 0 if cluster.running() else 3
    else:
        print(cluster.env())
    return 0


def _recorded_port(state_dir: Path) -> int | None:
    state = state_dir / "state.json"
    if state.exists():
        return int(json.loads(state.read_text())["api_port"])
    return None


if __name__ == "__main__":
    raise SystemExit(main())
