"""The database workload (spec.database): PostgreSQL on a volume of the class under test, pgbench beside it. A step
package: ``entry.py`` declares its entry, which the registry collects."""
