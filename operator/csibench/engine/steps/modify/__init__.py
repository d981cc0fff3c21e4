"""The modifyVolume step (spec.modify): every volume moved to another VolumeAttributesClass, fio before and after. A
step package: ``entry.py`` declares its entry, which the registry collects."""
