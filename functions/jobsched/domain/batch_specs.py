"""The jobs of a worker's received batch, read together before any of its runs is claimed (design §5.1)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jobsched.models import Job


@dataclass(frozen=True)
class BatchSpecs:
    """The jobs of a received batch's runs, read together before any is claimed (``Worker.read_specs``):
    ``jobs`` by id, of the ``ids`` asked for; an id asked for and absent from ``jobs`` is a deleted job."""

    ids: frozenset[str]
    jobs: Mapping[str, Job]
    read_at_ms: int | None = None
    """Epoch ms taken before the read was sent (None: unknown, as old as can be: an ``overlap: allow`` spec is
    then read again after its run's claim)."""

    def asked(self, job_id: str) -> bool:
        """Whether ``job_id`` was read with the batch (if not, its run reads its own job)."""
        return job_id in self.ids
