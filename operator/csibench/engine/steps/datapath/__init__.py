"""The data path (spec.dataPath): fio on the run's volumes, one workload after the other; and verifyClone
(spec.dataPath.verify), each clone held against the checksums the data path took. A step package: ``entry.py``
declares both steps' entries, which the registry collects; its modules import each other, never another step."""
