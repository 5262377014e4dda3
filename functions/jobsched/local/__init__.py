"""Local mode: the whole of jobsched in one process on an embedded moto (``jobsched local``).

``runtime`` wires it together; ``state`` keeps it durable across restarts; ``event_source`` feeds SQS to the
worker handler like Lambda; ``server`` serves the API's WSGI app; ``printer`` prints runs and alerts.
"""
