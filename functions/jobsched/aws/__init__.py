"""Adapters to AWS services other than the tables: the run queue, alerts, and targets."""
