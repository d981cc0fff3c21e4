"""The ``csibench`` command: run the operator, print the CRD, print a run's report."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def _operator(args: argparse.Namespace) -> int:
    import kopf

    import csibench.handlers  # noqa: F401 - registers the handlers with kopf

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    namespaces = args.namespace or []
    kopf.run(
        standalone=True,
        clusterwide=not namespaces,
        namespaces=namespaces,
        liveness_endpoint=f"http://0.0.0.0:{args.health_port}/healthz",
    )
    return 0


def _crd(args: argparse.Namespace) -> int:
    from csibench.api.crd import render_crd

    text = render_crd()
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _report(args: argparse.Namespace) -> int:
    import asyncio

    from csibench.kube.client import KubeClient, load_configuration
    from csibench.kube.resources import BENCHMARK_RUNS
    from csibench.report.render import render_table

    async def fetch() -> dict[str, object] | None:
        client = KubeClient(load_configuration(args.kubeconfig), qps=20, burst=40, max_in_flight=2)
        try:
            return await client.get(BENCHMARK_RUNS.path(args.namespace, args.run))
        finally:
            client.close()

    run = asyncio.run(fetch())
    if run is None:
        print(f"csibench: BenchmarkRun {args.namespace}/{args.run} not found", file=sys.stderr)
        return 1
    sys.stdout.write(render_table(run))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="csibench", description="Benchmark CSI storage with BenchmarkRuns.")
    commands = parser.add_subparsers(dest="command", required=True)
    operator = commands.add_parser("operator", help="run the operator (in-cluster or with KUBECONFIG)")
    operator.add_argument("--namespace", action="append", help="watch only this namespace (repeatable)")
    operator.add_argument("--health-port", type=int, default=8081, help="liveness endpoint port")
    operator.add_argument("--verbose", action="store_true")
    operator.set_defaults(func=_operator)
    crd = commands.add_parser("crd", help="print the BenchmarkRun CRD generated from the models")
    crd.add_argument("-o", "--output", help="write to this file instead of stdout")
    crd.set_defaults(func=_crd)
    report = commands.add_parser("report", help="print a run's step table")
    report.add_argument("run", help="BenchmarkRun name")
    report.add_argument("-n", "--namespace", default="default")
    report.add_argument("--kubeconfig", default=None)
    report.set_defaults(func=_report)
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
