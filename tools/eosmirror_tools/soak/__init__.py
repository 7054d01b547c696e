"""The RPO/soak harness of issue #22 (in progress): an independent time-lag sampler so far."""
