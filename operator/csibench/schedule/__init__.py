"""The schedule controller: a BenchmarkSchedule's runs, one per due time of its cron schedule, with CronJob's
concurrency policy, deadlines and history limits. A layer beside the engine, as the suite is: it creates
BenchmarkRuns and reads their status, and the engine runs each of them as it would any run."""
