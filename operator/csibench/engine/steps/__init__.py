"""The steps, one module per step or lifecycle pair: each declares its catalog entries as ``ENTRIES`` and holds
what is that step's alone (its manifest, skip rules, judges, boundaries, note, and its check before the run).
``engine/catalog.py`` collects them; nothing else imports a step module, and no step module imports another
(``tests/unit/test_layers.py`` holds both).
"""
