"""EventBridge rules: the scheduler's once-a-minute trigger per partition, and the sweeper's."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

EVERY_MINUTE = events.Schedule.rate(Duration.minutes(1))


def scheduler_event(partition: int) -> dict[str, int]:
    """The event a scheduler invocation receives: ``{"partition": n}`` (0-based)."""
    return {"partition": partition}


class Triggers(Construct):
    """``scheduler_rules[n]`` starts the scheduler for partition ``n`` every minute; ``sweeper_rule``
    starts the sweeper every minute.

    One rule per partition (rather than one fan-out invocation) keeps each partition's loop in its
    own invocation, so a slow partition never delays another; the lease makes overlapping
    invocations of the same partition safe.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        scheduler: lambda_.IFunction,
        sweeper: lambda_.IFunction,
        partitions: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.scheduler_rules: list[events.Rule] = []
        for partition in range(partitions):
            rule = events.Rule(
                self,
                f"SchedulerPartition{partition}",
                description=f"jobsched: start the scheduler of partition {partition} every minute",
                schedule=EVERY_MINUTE,
            )
            rule.add_target(
                targets.LambdaFunction(
                    scheduler,
                    event=events.RuleTargetInput.from_object(scheduler_event(partition)),
                    # A trigger delivered late is useless: the next one is a minute away.
                    max_event_age=Duration.minutes(1),
                    retry_attempts=2,
                )
            )
            self.scheduler_rules.append(rule)
        self.sweeper_rule = events.Rule(
            self, "Sweeper", description="jobsched: sweep stuck runs every minute", schedule=EVERY_MINUTE
        )
        self.sweeper_rule.add_target(
            targets.LambdaFunction(sweeper, max_event_age=Duration.minutes(1), retry_attempts=2)
        )
