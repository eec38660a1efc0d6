"""What the bench raises when a workload did not do what its figures assume."""


class BenchError(RuntimeError):
    """The workload did not do what it must for its figures to mean anything."""
