"""In-memory fakes of the ports, held to the same contract as the DynamoDB and SQS adapters (contract tests in
``tests/contract``): the domain's logic tests run on them without moto."""
