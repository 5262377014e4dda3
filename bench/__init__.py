"""Benchmarks of jobsched (issue 8): ``make bench`` runs ``python -m bench`` (see ``bench/README.md``)."""
