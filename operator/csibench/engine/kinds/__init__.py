"""The run's own kinds of object (claims, pods, snapshots, group snapshots), one module each: the state the run
keeps of one object, the fields that state is made of, and — from the same field list — the change filter's
signature, so a field a judge reads is always a field the filter watches (``tests/unit/test_kinds.py`` holds that
for every judge)."""
