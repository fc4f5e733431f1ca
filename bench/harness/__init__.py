"""bench/run_all.py's pieces: the workloads, the runners of each framework, the
machine measurements and the report."""
