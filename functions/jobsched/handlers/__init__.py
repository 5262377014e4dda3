"""Lambda entry points: one thin module per function (api, scheduler, worker, sweeper)."""
