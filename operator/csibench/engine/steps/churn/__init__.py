"""The churn (spec.churn): waves of volumes through the lifecycle for a duration, one row per window. A step
package: ``entry.py`` declares its entry, which the registry collects; ``waves.py`` keeps its clock, ``windows.py``
makes its rows (pure), ``table.py`` says where they live."""
