"""fio for one volume of one workload: the command line the pod runs, and what its log says (pure).

The pod runs ``fio --output-format=json --group_reporting`` over ``jobsPerVolume`` jobs, each with a file of its
own on the volume. ``--group_reporting`` makes fio merge its jobs (their I/O and their latency histograms) into
one result: one result per volume. ``json+`` adds the completion-latency histogram (``clat_ns.bins``), which the
row merges exactly across pods (``api.histogram``). ``--status-interval`` makes fio print a cumulative JSON
document about ten times over the ramp and runtime (every second for runs of up to 10 s), so ``kubectl logs``
of a running workload pod shows how it goes without the histograms growing the log past a few of them a second;
the last document is the final result.
Sizes go to fio in bytes, so fio's own unit conventions never matter. The
log holds stdout and stderr, as ``pods/log`` returns them: fio's error lines (``fio: ...``) and its JSON. A
result whose job reports an error, or a log without JSON, is a failure carrying fio's own message: its lines of
one shape said once with their count (fio writes an ``io_u error`` per I/O in flight), its last, most specific
line first (``api.text.collapse_lines``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from csibench.api import histogram
from csibench.api import validation as v
from csibench.api.models import BenchmarkRunSpec, DataPathSpec, DataPathWorkload, FioPattern, VolumeMode
from csibench.engine.fio_log import messages_of, split_log

MOUNT_PATH = "/data"
DEVICE_PATH = "/dev/csibench/data"  # a raw block volume's devicePath (volumeMode Block)
PERCENTILES = ("50.000000", "99.000000")  # fio's own keys for the per-volume p50 and p99 the report keeps
STATUS_DOCUMENTS = 10  # cumulative documents over the runtime (each carries its histograms)
MAX_MESSAGE = 600


def size_bytes(quantity: str) -> int:
    return int(v.parse_quantity(quantity))


# A class that formats its volumes gives fio less than the volume's size: the filesystem's own metadata takes room.
# Measured with mkfs.ext4 -m 0, as Kubernetes' mount-utils format a volume (e2fsprogs 1.47): 8-33% of volumes of
# 4-511 MiB (mke2fs's "small" type: 1 KiB blocks, an inode per 4 KiB, a journal), 3-5% from 512 MiB up (4 KiB
# blocks). So the run leaves 24% of a volume under 512 MiB plus 1 MiB, and 6% plus 8 MiB from 512 MiB up, which
# covers every size measured (4 MiB to 8 GiB) with room for the files' own extents. Other filesystems were not
# measured; the rule is applied to them as it is. The class says it formats with ``csi.storage.k8s.io/fstype``
# or the deprecated ``fstype`` key, in any case, as external-provisioner reads them; a class that names no fstype
# is left to the driver, and not checked.
FSTYPE_PARAMETER = "csi.storage.k8s.io/fstype"
MIB = 1024 * 1024
SMALL_FILESYSTEM = 512 * MIB  # below: mke2fs's small type
SMALL_SHARE, SMALL_BYTES = 0.24, 1 * MIB
LARGE_SHARE, LARGE_BYTES = 0.06, 8 * MIB


def filesystem_reserve(size: int) -> tuple[float, int]:
    """The share of the volume and the bytes the rule leaves to the filesystem's metadata."""
    return (SMALL_SHARE, SMALL_BYTES) if size < SMALL_FILESYSTEM else (LARGE_SHARE, LARGE_BYTES)


def room_for_files(size: int) -> int:
    """Bytes of files that fit a formatted volume of ``size`` bytes, by the rule above."""
    share, extra = filesystem_reserve(size)
    return max(size - int(size * share) - extra, 0)


def fstype_of(parameters: Mapping[str, str]) -> str | None:
    """The filesystem a class formats its volumes with, as external-provisioner reads it (None: not named)."""
    for key, value in parameters.items():
        if (key == FSTYPE_PARAMETER or key.lower() == "fstype") and value:
            return value
    return None


def _mebibytes(size: int) -> str:
    return f"{size / MIB:.1f}".removesuffix(".0") + "Mi"


def files_that_do_not_fit(spec: BenchmarkRunSpec, parameters: Mapping[str, str]) -> str | None:
    """Before anything is created: why the data path's files cannot fit a volume of a class with a filesystem,
    or None. Admission bounds jobsPerVolume x fileSize by the size; only the class says there is a filesystem."""
    data, fstype = spec.dataPath, fstype_of(parameters)
    if data is None or fstype is None or spec.volumeMode == VolumeMode.BLOCK:  # a raw device: no filesystem
        return None
    size = size_bytes(spec.volume_size)  # after the run's expansion, which comes before the data path
    room = room_for_files(size)
    sizes = {workload.name: size_bytes(data.file_size(workload)) for workload in data.workloads}
    largest = max(sizes.values())
    files = largest * data.jobsPerVolume
    if files <= room:
        return None
    which = "every workload" if len(set(sizes.values())) == 1 else \
        "workload " + ", ".join(name for name, size in sizes.items() if size == largest)
    share, extra = filesystem_reserve(size)
    return (f"dataPath: jobsPerVolume x fileSize ({data.jobsPerVolume} x {_mebibytes(largest)} = "
            f"{_mebibytes(files)}, {which}) does not fit volumes of {spec.volume_size} formatted {fstype}: the "
            f"filesystem's own metadata takes room (measured for ext4: 8-33% of volumes under 512Mi, 3-5% above), "
            f"so the run leaves it {share:.0%} of the volume plus {_mebibytes(extra)}; at most {_mebibytes(room)} "
            "of files fit: raise size or lower fileSize or jobsPerVolume")


FILENAME_FORMAT = "csibench.$jobnum.$filenum"  # the same files for every workload, not one set per workload


def build_fio_command(spec: DataPathSpec, workload: DataPathWorkload,
                      rate_iops: tuple[int, int] | None = None, block: bool = False) -> list[str]:
    """The container's command: every value comes from validated fields (patterns in the CRD and the models).
    Every workload uses the same files (``FILENAME_FORMAT``: job N's file is ``csibench.N.0`` whatever the row),
    as the reference setup lays out one file per process once: the volume holds jobsPerVolume x fileSize, the
    bound admission checks, not that times the number of workloads, and reads read what earlier rows wrote.
    ``rate_iops``: (read, write) IOPS per job, a rate level's throttle (fio's 0: that direction unlimited).
    ``block``: the volume is a raw device at ``DEVICE_PATH``; job N works on its own region of it, fileSize bytes
    from N x fileSize (``--offset_increment``), as it would on its own file."""
    size = size_bytes(spec.file_size(workload))
    where = ([f"--filename={DEVICE_PATH}", f"--offset_increment={size}"] if block
             else [f"--directory={MOUNT_PATH}", f"--filename_format={FILENAME_FORMAT}"])
    command = ["fio", f"--name={workload.name}", *where, f"--rw={workload.pattern.value}",
               f"--bs={size_bytes(workload.blockSize)}", f"--size={size}",
               f"--numjobs={spec.jobsPerVolume}", f"--iodepth={workload.iodepth or spec.iodepth}",
               f"--ioengine={workload.ioengine or spec.ioengine}", f"--direct={int(spec.direct)}",
               "--time_based", f"--runtime={spec.runtimeSeconds}", f"--ramp_time={spec.rampSeconds}",
               "--group_reporting", f"--percentile_list={':'.join(f'{p:g}' for p in histogram.PERCENTILES)}",
               "--output-format=json+", f"--status-interval={status_interval(spec.rampSeconds + spec.runtimeSeconds)}"]
    if workload.pattern == FioPattern.RANDRW:
        command.insert(5, f"--rwmixread={workload.readPercent}")
    if rate_iops is not None:
        command.append(f"--rate_iops={rate_iops[0]},{rate_iops[1]}")
    return command


def build_layout_command(command: list[str]) -> list[str]:
    """The init container's command: the workload's own fio line, laying out its files and exiting
    (``--create_only``), so the measured run finds them there and starts measuring at once (``barrier``)."""
    return [*command, "--create_only=1"]


def build_block_layout_command(spec: DataPathSpec) -> list[str]:
    """The init container's command on a raw block volume: every job's region written once, sequentially in
    1 MiB direct writes, before the first workload measures (a file's layout writes it likewise). A region never
    written would read as a hole, which thin-provisioned storage (and the local array's sparse file) answers
    without touching its media: reads would measure nothing. The regions are those of the largest fileSize, so
    every workload's region lies within them."""
    largest = max(size_bytes(spec.file_size(workload)) for workload in spec.workloads)
    return ["fio", "--name=layout", f"--filename={DEVICE_PATH}", "--rw=write", f"--bs={MIB}", f"--size={largest}",
            f"--offset_increment={largest}", f"--numjobs={spec.jobsPerVolume}", "--ioengine=psync",
            f"--direct={int(spec.direct)}", "--group_reporting", "--output-format=terse"]


def status_interval(seconds: int) -> int:
    """Seconds between fio's progress documents: about STATUS_DOCUMENTS of them over the ramp and the runtime,
    at least 1 s."""
    return max(1, seconds // STATUS_DOCUMENTS)


@dataclass(frozen=True)
class Direction:
    bytes_per_second: float
    iops: float
    clat_p50: float | None  # seconds, as fio printed them for this volume
    clat_p99: float | None
    clat_bins: histogram.Histogram = field(default_factory=dict)  # every completion, ns bins (json+)
    clat_max: float | None = None  # seconds


@dataclass(frozen=True)
class VolumeResult:
    """What one pod measured on its volume (all of its jobs, merged by fio)."""

    read: Direction
    write: Direction
    jobs: int
    window_ms: tuple[int, int] | None = None  # (start, end) of the measured I/O, epoch ms on the pod's clock

    @property
    def bytes_per_second(self) -> float:
        return self.read.bytes_per_second + self.write.bytes_per_second


def _window(document: dict[str, object], job: dict[str, object]) -> tuple[int, int] | None:
    """When the pod measured: fio stamps its last document when the run ends (``timestamp_ms``), and each
    direction's ``runtime`` (ms) is the measured time after the ramp; the longer of the two ends there."""
    end = document.get("timestamp_ms")
    runtimes = [d.get("runtime") for d in (job.get("read"), job.get("write")) if isinstance(d, dict)]
    runtime = max((r for r in runtimes if isinstance(r, int) and not isinstance(r, bool)), default=0)
    if not isinstance(end, int) or isinstance(end, bool) or runtime <= 0:
        return None
    return end - runtime, end


class FioFailed(ValueError):
    """The log shows no measurement: the message is fio's own (or says what the log held instead)."""


def _direction(data: dict[str, object]) -> Direction:
    clat = data.get("clat_ns") or {}
    percentiles = clat.get("percentile") if isinstance(clat, dict) else None
    percentiles = percentiles if isinstance(percentiles, dict) else {}
    values = [percentiles.get(p) for p in PERCENTILES]
    p50, p99 = (float(x) / 1e9 if isinstance(x, (int, float)) and x > 0 else None for x in values)
    bw = data.get("bw_bytes", 0)
    iops = data.get("iops", 0)
    bins = histogram.from_json(clat.get("bins") if isinstance(clat, dict) else None)
    largest = clat.get("max") if isinstance(clat, dict) else None
    return Direction(float(bw) if isinstance(bw, (int, float)) else 0.0,
                     float(iops) if isinstance(iops, (int, float)) else 0.0, p50, p99, bins,
                     float(largest) / 1e9 if bins and isinstance(largest, (int, float)) and largest > 0 else None)


def parse_fio_log(log: str) -> VolumeResult:
    """One volume's result from its pod's log (the last JSON document); FioFailed with fio's message when there
    is none."""
    documents, _ = split_log(log)
    if not documents:
        raise FioFailed(messages_of(log) or "fio wrote no output")
    document = documents[-1] if isinstance(documents[-1], dict) else {}
    jobs = document.get("jobs")
    if not isinstance(jobs, list) or not jobs or not isinstance(jobs[0], dict):
        raise FioFailed(messages_of(log) or "fio reported no job")
    job = jobs[0]
    error = job.get("error", 0)
    if error:
        raise FioFailed(messages_of(log) or f"fio job {job.get('jobname')} ended with error {error}")
    options = job.get("job options") or {}
    numjobs = options.get("numjobs", "1") if isinstance(options, dict) else "1"
    return VolumeResult(_direction(job.get("read") or {}), _direction(job.get("write") or {}),
                        int(numjobs) if str(numjobs).isdigit() else 1, _window(document, job))
