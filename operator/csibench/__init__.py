"""csibench: benchmark CSI storage from inside Kubernetes, as BenchmarkRun custom resources."""
