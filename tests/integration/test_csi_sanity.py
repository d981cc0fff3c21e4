"""The simulated driver is a CSI driver by the spec: the CSI community's conformance suite, csi-sanity (built from
its pinned Go module like the sidecars), runs against a freshly started standalone driver (its own sockets and
data directory, no cluster) and every spec that runs passes. The specs it skips are the capabilities the array
does not offer; each is named with its reason in docs/local-cluster.md, and there are at most 15. csi-sanity's JUnit
report is kept (``build/csi-sanity/junit.xml``) and its summary line printed.

The ground truth stays exact through all of it: the suite's refused calls cost the array nothing, and everything
the suite made, attached or staged it also removed, so every operation has its undo, once."""

from __future__ import annotations

import collections
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster import build
from localcluster.launcher import REPO_ROOT
from tests.support.csi_driver import records

pytestmark = pytest.mark.integration

REPORT = REPO_ROOT / "build" / "csi-sanity" / "junit.xml"
MAX_SKIPPED = 15
SANITY_TIMEOUT_SECONDS = 600
NODE = "standalone-node-0"
# Undone by: every volume made (created or cloned) is deleted, every attach detached, every stage unstaged.
UNDO = {("createVolume", "cloneVolume"): "deleteVolume", ("attach",): "detach", ("mount",): "unmount",
        ("createSnapshot",): "deleteSnapshot"}


@pytest.fixture
def standalone_driver(tmp_path: Path) -> Iterator[Path]:
    """A fresh standalone simulated driver (one node) under ``tmp_path``; yields its socket directory."""
    csi_dir, log_path = tmp_path / "csi", tmp_path / "driver.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "localcluster.simulator.standalone", "--csi-dir", str(csi_dir), "--data-dir",
             str(tmp_path / "data"), "--nodes", "1", "--ground-truth", str(tmp_path / "truth.jsonl")],
            cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not (csi_dir / f"{NODE}.sock").exists():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the standalone driver did not start (exit {process.poll()}):\n"
                            f"{log_path.read_text()[-4000:]}")
            time.sleep(0.1)
        yield csi_dir
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _skipped_specs(report: Path) -> dict[str, str]:
    """Each skipped spec's name (its full text, without Ginkgo's ``[It]`` prefix) and the reason it gives."""
    skipped = {}
    for case in ElementTree.parse(report).iter("testcase"):
        if case.get("status") == "skipped":
            reason = case.find("skipped")
            name = re.sub(r"^\[It\]\s*", "", case.get("name", ""))
            skipped[name] = (reason.get("message", "") if reason is not None else "")[:200]
    return skipped


def test_csi_sanity_passes_against_the_simulated_driver(standalone_driver: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    sanity = build.expected_binaries().csi_sanity
    assert sanity.exists(), f"{sanity} missing: run scripts/bootstrap (it builds csi-sanity)"
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.unlink(missing_ok=True)
    mutable = tmp_path / "mutable-parameters.yaml"  # a VolumeAttributesClass's parameters the array takes
    mutable.write_text("qosPolicy: gold\n")
    try:
        completed = subprocess.run(
            [str(sanity), f"--csi.endpoint=unix://{standalone_driver / f'{NODE}.sock'}",
             f"--csi.controllerendpoint=unix://{standalone_driver / 'controller.sock'}",
             f"--csi.mountdir={tmp_path / 'mount'}", f"--csi.stagingdir={tmp_path / 'staging'}",
             f"--csi.testvolumemutableparameters={mutable}", f"--ginkgo.junit-report={REPORT}", "--ginkgo.no-color",
             f"--ginkgo.timeout={SANITY_TIMEOUT_SECONDS}s"],
            capture_output=True, text=True, timeout=SANITY_TIMEOUT_SECONDS + 60)
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"csi-sanity did not finish in {SANITY_TIMEOUT_SECONDS + 60} s; its output ends:\n"
                    f"{str(expired.stdout or '')[-4000:]}")
    output = completed.stdout + completed.stderr
    summary = [line.strip() for line in output.splitlines()
               if re.match(r"\s*(Ran \d+ of \d+ Specs|(SUCCESS|FAIL)! -- )", line)]
    with capsys.disabled():
        print(f"\ncsi-sanity: {' '.join(summary) or '(no summary line)'} (JUnit report: {REPORT})")
    assert completed.returncode == 0 and REPORT.exists(), (
        f"csi-sanity exited {completed.returncode}; its output ends:\n{output[-6000:]}")
    statuses = collections.Counter(case.get("status") for case in ElementTree.parse(REPORT).iter("testcase"))
    assert statuses["failed"] == 0 and statuses["passed"] > 0, statuses
    match = re.search(r"(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped", output)
    assert match, f"no summary line in csi-sanity's output:\n{output[-4000:]}"
    passed, failed, _, skipped_count = map(int, match.groups())
    assert failed == 0 and skipped_count <= MAX_SKIPPED, summary
    skipped = _skipped_specs(REPORT)
    assert len(skipped) == skipped_count
    page = " ".join((REPO_ROOT / "docs" / "local-cluster.md").read_text().split())
    undocumented = {name: reason for name, reason in skipped.items() if f"`{name}`" not in page}
    assert not undocumented, (f"skipped specs docs/local-cluster.md does not name (in backquotes) with a reason: "
                              f"{undocumented}")
    truth = records(tmp_path)
    assert truth and all(record["result"] == "ok" for record in truth)
    operations = collections.Counter(record["op"] for record in truth)
    made = {done: sum(operations[op] for op in ops) for ops, done in UNDO.items()}
    assert made == {done: operations[done] for done in UNDO.values()} and all(made.values()), operations
    assert passed + skipped_count <= statuses.total()
