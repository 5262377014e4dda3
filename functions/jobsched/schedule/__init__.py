"""The schedule engine: cron, rate and one-off schedules, their fires and their counts (design §1)."""
