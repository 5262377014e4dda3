"""In-memory fakes of the ports, held to the same contract as the DynamoDB and SQS adapters: the domain's
logic tests run on them, fast and without moto."""
