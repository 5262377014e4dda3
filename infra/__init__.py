"""The jobsched CDK app: one stack (``infra.stack``) composing storage, messaging, functions, API,
triggers and monitoring constructs, each owning its resources."""
