"""The fairqueue benchmark (issue #2): pipeline throughput against a bare SKIP LOCKED loop, and
claim latency as last-day history grows. Run it with ``python -m bench`` (``make bench``).
"""
