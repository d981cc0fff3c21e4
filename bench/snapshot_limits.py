"""Snapshot-controller client limits: createSnapshot of N snapshots with upstream's QPS 5 / burst 10 against
raised limits, side by side on one cluster (``bench/client_limits.py``).

Only the snapshot-controller changes between the two runs: first with upstream's defaults
(``--kube-api-qps=5 --kube-api-burst=10``), then restarted with ``--kube-api-qps=Q --kube-api-burst=B``. What the
difference shows is the snapshot-controller throttling itself (each snapshot costs it several API writes: the
content, the snapshot's finalizers, status), the effect users see on real clusters at hundreds of snapshots.
"""

from __future__ import annotations

import argparse

from bench.client_limits import compare_client_limits, print_comparison


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--snapshots", type=int, default=200)
    parser.add_argument("--qps", default="100", help="the raised --kube-api-qps of the snapshot-controller")
    parser.add_argument("--burst", default="200", help="the raised --kube-api-burst of the snapshot-controller")
    args = parser.parse_args()
    spec = {"volumes": args.snapshots, "volumeSnapshotClassName": "csibench-sim-snapclass",
            "steps": ["createVolume", "createSnapshot", "deleteSnapshot", "deleteVolume"]}
    comparison = compare_client_limits("snapshot-controller", args.qps, args.burst, spec)
    print_comparison(f"Snapshot-controller client limits (N={args.snapshots}: upstream 5/10 vs {args.qps}/"
                     f"{args.burst})", "bench.snapshot_limits", "snapshot-controller", comparison)


if __name__ == "__main__":
    main()
