"""csi-resizer client limits: expandVolume of N volumes with upstream's QPS 5 / burst 10 against raised limits, side
by side on one cluster (``bench/client_limits.py``).

Only csi-resizer changes between the two runs (it also runs --workers=N, so its 10 workers do not pace either
run). Each expansion costs it several API writes (the claim's status when it starts, the PV's capacity, the claim's
status when it ends), which is what published figures show pacing it on real clusters
(vsphere-csi-driver: 7 → 11 expansions/s after raising them). In the throttled run's step time T its client can
send at most T × 5 + 10 requests, so (T × 5 + 10) / N bounds the requests per volume from above (equal when the
rate limit held it back the whole step): printed beside the figure the preflight assumes.
"""

from __future__ import annotations

import argparse

from bench.client_limits import UPSTREAM, compare_client_limits, print_comparison
from csibench.api.steps import RESIZER, StepName, facts_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--volumes", type=int, default=200)
    parser.add_argument("--qps", default="100", help="the raised --kube-api-qps of csi-resizer")
    parser.add_argument("--burst", default="200", help="the raised --kube-api-burst of csi-resizer")
    args = parser.parse_args()
    spec = {"volumes": args.volumes, "size": "1Gi", "expand": {"to": "2Gi"},
            "steps": ["createVolume", "expandVolume", "deleteVolume"]}
    comparison = compare_client_limits(RESIZER, args.qps, args.burst, spec,
                                       extra_flags={"workers": str(args.volumes)})
    print_comparison(f"csi-resizer client limits (N={args.volumes}: upstream 5/10 vs {args.qps}/{args.burst})",
                     "bench.resizer_limits", RESIZER, comparison)
    seconds = comparison.steps["upstream-limits"][StepName.EXPAND_VOLUME]
    qps, burst = float(UPSTREAM["kube-api-qps"]), float(UPSTREAM["kube-api-burst"])
    assumed = facts_of(StepName.EXPAND_VOLUME).requests_per_object[RESIZER]
    implied = (seconds * qps + burst) / args.volumes
    print(f"\nRequests per expansion the throttled run allows: at most {implied:.1f} (the preflight's "
          f"ClientThrottling assumes {assumed})")


if __name__ == "__main__":
    main()
