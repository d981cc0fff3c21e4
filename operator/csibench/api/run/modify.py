"""spec.modify and its rows: every volume of the run moved to another VolumeAttributesClass (ControllerModifyVolume
through the external-resizer), timed until the class is in effect, with fio on the same volumes before and after.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from csibench.api import validation as v
from csibench.api.base import Model as _Model
from csibench.api.run.common import StepState, cel
from csibench.api.run.datapath import WHOLE_MIB_PATTERN


class ModifySpec(_Model):
    """The modifyVolume step: each bound claim's spec.volumeAttributesClassName set at once, done when its
    status.currentVolumeAttributesClassName says the new class and no modification is pending; before it and
    after it (outside its clock) one fio pod per volume measures what the volumes deliver."""

    volumeAttributesClassName: str = Field(
        ..., min_length=1, max_length=v.DNS_SUBDOMAIN_MAX, pattern=v.DNS_SUBDOMAIN_PATTERN,
        description="The VolumeAttributesClass to move every volume to (it must exist, for the class's driver).")
    fioSeconds: int = Field(10, ge=0, le=3600,
                            description="Seconds of fio (4 KiB random reads and writes, direct I/O) per volume before "
                                        "and after the change; 0: no fio, the change alone.")
    fioSize: str = Field("64Mi", max_length=16, pattern=WHOLE_MIB_PATTERN, json_schema_extra=cel((
        "quantity(self).compareTo(quantity('64Gi')) <= 0", "modify.fioSize must be at most 64Gi")),
        description="The file fio reads and writes on each volume (it must fit the volume).")


class ModifyWhen(StrEnum):
    BEFORE = "before"  # fio on the volumes in their class before the change
    AFTER = "after"  # the same fio once the new class is in effect


class ModifyRow(_Model):
    """fio on every volume at once, before or after the class change: what the volumes delivered together."""

    when: ModifyWhen = Field(..., description="before or after the change.")
    attributesClass: str | None = Field(None, description="The class the volumes had then (before: the "
                                                                 "claims' current class, if any).")
    state: StepState = Field(StepState.PENDING, description="Pending, Running, Succeeded, Failed or Interrupted.")
    volumes: int = Field(0, description="Volumes measured.")
    readIOPS: float | None = Field(None, description="Read IOPS, summed over the volumes.")
    writeIOPS: float | None = Field(None, description="Write IOPS, summed over the volumes.")
    readMiBps: float | None = Field(None, description="Read MiB/s, summed over the volumes.")
    writeMiBps: float | None = Field(None, description="Write MiB/s, summed over the volumes.")
    perVolumeIOPS: float | None = Field(None, description="Read plus write IOPS of the slowest volume.")
    message: str | None = Field(None, description="Why the row failed (fio's or Kubernetes' words).")


MAX_MODIFY_ROWS = len(ModifyWhen)
