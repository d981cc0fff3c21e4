"""The shared-volume step (spec.shared): one ReadWriteMany volume, probe pods on several nodes. A step package:
``entry.py`` declares its entry, which the registry collects."""
