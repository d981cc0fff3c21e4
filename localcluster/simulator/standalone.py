"""Serve the simulated CSI driver alone, without a cluster: ``python -m localcluster.simulator.standalone
--csi-dir DIR --data-dir DIR [--nodes N] [--storage-class NAME] [--parameter key=value ...] [--ground-truth FILE]``.

Why: the CSI community's conformance suite (csi-sanity), or anyone who wants to talk CSI to the array model, needs
the driver and nothing else. In the local cluster the driver learns a volume's class from the claim the
provisioner names (``--extra-create-metadata``); here there is no cluster, so a CreateVolume without claim
metadata is on the one class this process serves (``--storage-class``, default ``standalone``), whose array
behaves as the ``--parameter`` pairs say (the StorageClass parameters of ``config.py``: latency, concurrency,
failures...). A CreateVolume that names a claim is NOT_FOUND: there is no cluster to find it in. Sockets:
``<csi-dir>/controller.sock`` and ``<csi-dir>/<node>.sock`` per node (``standalone-node-<i>``), as the simulator
serves them; the ground truth, when asked for, is the same JSON-lines record.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from pathlib import Path

from localcluster.simulator.backend import Backend, GroundTruth
from localcluster.simulator.config import parse_backend_model
from localcluster.simulator.driver import Driver, serve

log = logging.getLogger("simulator.standalone")
DEFAULT_CLASS = "standalone"
NODE_PREFIX = "standalone-node-"


class StandaloneArray:
    """The driver's surroundings without a cluster: one array (one class), no claims."""

    def __init__(self, storage_class: str, parameters: dict[str, str], truth: GroundTruth) -> None:
        self.storage_class = storage_class
        self._backend = Backend(storage_class, parse_backend_model(parameters), truth)

    def backend(self, storage_class: str) -> Backend:
        # Handles name their class; a handle of another class (made up by a caller) is still this one array.
        return self._backend

    async def storage_class_of_claim(self, namespace: str, name: str) -> str | None:
        return None  # no cluster, no claims

    def run_of_claim(self, namespace: str, name: str) -> str:
        return ""


def parse_parameters(pairs: list[str]) -> dict[str, str]:
    """``["latency=10ms", "concurrency=1"]`` -> a StorageClass's parameters (pure)."""
    parameters = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key.strip():
            raise ValueError(f"--parameter {pair!r} is not key=value")
        parameters[key.strip()] = value.strip()
    return parameters


async def run(csi_dir: Path, data_dir: Path, nodes: int, storage_class: str, parameters: dict[str, str],
              ground_truth: Path | None) -> None:
    truth = GroundTruth(ground_truth)
    driver = Driver(StandaloneArray(storage_class, parameters, truth), data_dir, default_class=storage_class)
    sockets = {f"{NODE_PREFIX}{index}": csi_dir / f"{NODE_PREFIX}{index}.sock" for index in range(nodes)}
    servers = await serve(driver, csi_dir / "controller.sock", sockets)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("standalone driver ready: class %s, %d nodes", storage_class, nodes)
    await stop.wait()
    for server in servers:
        await server.stop(grace=None)
    truth.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster.simulator.standalone",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--csi-dir", type=Path, required=True, help="directory of the CSI unix sockets")
    parser.add_argument("--data-dir", type=Path, required=True, help="volume and snapshot data directories")
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--storage-class", default=DEFAULT_CLASS, help="the class every volume is on")
    parser.add_argument("--parameter", action="append", default=[], metavar="KEY=VALUE",
                        help="a StorageClass parameter of the array (repeatable), e.g. latency=10ms")
    parser.add_argument("--ground-truth", type=Path, default=None, help="JSON-lines file of backend operations")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        parameters = parse_parameters(args.parameter)
    except ValueError as error:
        parser.error(str(error))
    asyncio.run(run(args.csi_dir.resolve(), args.data_dir.resolve(), args.nodes, args.storage_class, parameters,
                    args.ground_truth))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
