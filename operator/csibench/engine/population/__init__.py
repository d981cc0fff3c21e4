"""spec.population: the background objects a run's batch is measured beside (``api/population.py`` says why they
are statically provisioned and share the seed's handles).

``manifests.py`` builds them (pure), ``making.py`` makes the seed and then the population and waits until every
claim is Bound and every snapshot ready, ``removal.py`` removes everything that carries the owner's population
label, snapshots before the seed volume they were taken of. The population is not a step: nothing of it is timed
as the batch is, and the steps' watches never see it.
"""
