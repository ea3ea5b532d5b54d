"""What an operator runs around the scheduler: the retraining job, the install check, the cluster report, the
promotion judge (automatic rollback), and logging.
"""
