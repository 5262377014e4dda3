"""SQS queues and the alerts topic, built from ``jobsched.resources`` (visibility, retention, redrive)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.nag import acknowledge
from jobsched import resources
from jobsched.resources import QueueDef


class Messaging(Construct):
    """The run queue with its DLQ, the dead-run queue and the alerts topic.

    Attributes: ``queues`` (definition ``env_var`` -> queue), ``run_queue``, ``run_dlq``,
    ``dead_run_queue``, ``alerts_topic``. Every queue is encrypted (SQS-managed SSE) and refuses
    non-TLS requests; so does the topic. The topic carries ``owner`` and ``job_id`` message
    attributes on each alert, so a team subscribes with a filter policy on ``owner``.
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.queues: dict[str, sqs.Queue] = {}
        by_id: dict[str, sqs.Queue] = {}
        # resources.QUEUES lists a dead-letter queue before the queue that redrives into it.
        for definition in resources.QUEUES:
            queue = self._queue(definition, by_id)
            by_id[definition.id] = queue
            self.queues[definition.env_var] = queue
        self.run_queue = self.queues[resources.RUN_QUEUE.env_var]
        self.run_dlq = self.queues[resources.RUN_QUEUE_DLQ.env_var]
        self.dead_run_queue = self.queues[resources.DEAD_RUN_QUEUE.env_var]
        acknowledge(
            self.dead_run_queue,
            "AwsSolutions-SQS3",
            "The dead-run queue is itself the end of the line: it holds runs that used all their attempts "
            "(14 days) for people to inspect; nothing consumes it automatically, so there is nothing to redrive.",
        )
        self.alerts_topic = sns.Topic(
            self, resources.ALERTS_TOPIC_ID, display_name="jobsched dead-run alerts", enforce_ssl=True
        )

    def _queue(self, definition: QueueDef, existing: dict[str, sqs.Queue]) -> sqs.Queue:
        dead_letter = None
        if definition.dead_letter:
            dead_letter = sqs.DeadLetterQueue(
                queue=existing[definition.dead_letter], max_receive_count=definition.max_receive_count
            )
        queue = sqs.Queue(
            self,
            definition.id,
            visibility_timeout=Duration.seconds(definition.visibility_timeout_s),
            retention_period=Duration.seconds(definition.retention_s),
            dead_letter_queue=dead_letter,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        cfn = queue.node.default_child
        assert isinstance(cfn, sqs.CfnQueue)
        # Any other attribute the shared definition sets (names are the same in SQS and CloudFormation).
        for name, value in definition.attributes.items():
            cfn.add_property_override(name, value)
        return queue

    def environment(self) -> dict[str, str]:
        """``{"RUN_QUEUE_URL": <url>, ..., "ALERTS_TOPIC_ARN": <arn>}`` for the functions' environment."""
        env = {env_var: queue.queue_url for env_var, queue in self.queues.items()}
        env[resources.ALERTS_TOPIC_ENV] = self.alerts_topic.topic_arn
        return env
