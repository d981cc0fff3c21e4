"""The data path (spec.dataPath): fio on the run's volumes, one workload after the other."""
