"""The suite controller: a BenchmarkSuite's runs, created one after another (``spec.parallelism`` at most),
followed until the last ends. A layer beside the engine: it creates BenchmarkRuns and reads their status, and the
engine runs each of them as it would any run."""
