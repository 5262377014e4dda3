"""The cases of tests/unit/worker/test_overlap_waits.py on the DynamoDB stores (moto): ``overlap: skip`` never
turns a retry or a takeover into ``skipped``, and a claim under a spec read before a PATCH to ``skip`` never runs
beside a locked try."""

from tests.unit.worker.test_overlap_waits import (
    stubborn,
    test_a_claim_under_a_spec_read_before_a_patch_to_skip_does_not_run_beside_the_locked_try,
    test_a_lock_taken_just_after_a_patch_to_skip_waits_for_claims_under_the_earlier_spec,
    test_a_lost_workers_run_taken_over_while_the_lock_is_held_waits_and_its_lost_try_is_recorded,
    test_a_retry_finding_the_next_fires_try_holding_the_lock_waits_and_keeps_its_attempts,
    test_a_timed_out_lambda_try_keeps_the_lock_while_its_function_may_run,
    test_a_timed_out_try_that_does_not_stop_keeps_the_lock,
)

__all__ = [
    "stubborn",
    "test_a_claim_under_a_spec_read_before_a_patch_to_skip_does_not_run_beside_the_locked_try",
    "test_a_lock_taken_just_after_a_patch_to_skip_waits_for_claims_under_the_earlier_spec",
    "test_a_lost_workers_run_taken_over_while_the_lock_is_held_waits_and_its_lost_try_is_recorded",
    "test_a_retry_finding_the_next_fires_try_holding_the_lock_waits_and_keeps_its_attempts",
    "test_a_timed_out_lambda_try_keeps_the_lock_while_its_function_may_run",
    "test_a_timed_out_try_that_does_not_stop_keeps_the_lock",
]
