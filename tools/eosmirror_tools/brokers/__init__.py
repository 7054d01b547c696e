"""`make broker-matrix` (issue #53): eosmirror between clusters of different Kafka versions, judged by each
cluster's own version of Kafka's tools. See cells.py for the cells and what each part of a cell proves."""
