"""Preflight: what in the CSI machinery serving a class will distort a run, found before the run creates anything."""
