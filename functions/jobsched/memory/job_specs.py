"""The in-memory fake of ``jobsched.ports.runs.JobSpecs``: the jobs as the worker and the sweeper read them,
and each job's overlap lock, with the conditions of ``jobsched.store.jobs.JobStore``'s overlap lock."""

from __future__ import annotations

import threading

from jobsched.models import Job
from jobsched.ports.runs import OverlapHolder


class MemoryJobSpecs:
    """``put(job)`` saves a job, ``delete(job_id)`` removes it (the worker then sees it deleted); ``locks`` maps a
    job id to the try holding its overlap lock."""

    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}
        self.locks: dict[str, OverlapHolder] = {}
        self._lock = threading.Lock()

    def put(self, job: Job) -> Job:
        self.jobs[job.id] = job
        return job

    def delete(self, job_id: str) -> None:
        self.jobs.pop(job_id, None)

    def get_spec(self, job_id: str) -> Job | None:
        return self.jobs.get(job_id)

    def acquire_overlap(
        self,
        job_id: str,
        *,
        run_id: str,
        attempt: int,
        worker: str,
        now_ms: int,
        stale_before_ms: int,
        expires_at_s: int,
        replacing: OverlapHolder | None = None,
    ) -> OverlapHolder | None:
        """Take the lock when free, stale (``heartbeat_at < stale_before_ms``) or held by this run; with
        ``replacing``, exactly when that try holds it. None when taken, else the holder."""
        with self._lock:
            held = self.locks.get(job_id)
            if replacing is None:
                free = (
                    held is None
                    or (held.heartbeat_at is not None and held.heartbeat_at < stale_before_ms)
                    or held.run_id == run_id
                )
            else:
                free = held is not None and (held.run_id, held.attempt, held.worker) == (
                    replacing.run_id,
                    replacing.attempt,
                    replacing.worker,
                )
            if not free:
                return held or OverlapHolder(run_id="?")
            self.locks[job_id] = OverlapHolder(run_id, attempt, worker, now_ms)
            return None

    def renew_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str, now_ms: int) -> bool:
        with self._lock:
            held = self.locks.get(job_id)
            if held is None or (held.run_id, held.attempt, held.worker) != (run_id, attempt, worker):
                return False
            self.locks[job_id] = OverlapHolder(run_id, attempt, worker, now_ms)
            return True

    def release_overlap(self, job_id: str, *, run_id: str, attempt: int, worker: str) -> None:
        with self._lock:
            held = self.locks.get(job_id)
            if held is not None and (held.run_id, held.attempt, held.worker) == (run_id, attempt, worker):
                del self.locks[job_id]
