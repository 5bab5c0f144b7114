//! The autoscaling decisions, pure: no I/O, no tasks, no clock.
