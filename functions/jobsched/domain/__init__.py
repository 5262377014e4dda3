"""The domain: what jobsched exists for, free of AWS.

``planning`` (which fires a due job runs, skips or catches up), ``tick`` (one scheduler partition's tick),
``loop`` (lease and ticks once a second, partitions adopted), ``worker`` (one delivery from claim to result),
``retries`` (failed tries: backoff, dead runs and their notifications, shared with the sweeper),
``supervision`` (heartbeats and timeouts of a running try), ``sweeper`` (runs nobody looks after), ``lease``
(the leader lease with its fencing term).

These modules import nothing from ``jobsched.dynamodb``, ``jobsched.aws``, boto3, botocore or Powertools:
they speak the value types and ports of ``jobsched.ports``, so they run the same on the DynamoDB and SQS
adapters and on the in-memory fakes.
"""
