"""The per-slot copy protocol: the only part of eosmirror that runs on Spark executors."""
