"""The domain's ports: the value types it exchanges with storage, queues and alerts, the typed interfaces
(``Protocol`` classes) the adapters implement, and the errors they raise. Nothing here imports boto3,
botocore, Powertools, ``jobsched.dynamodb`` or ``jobsched.aws``."""
