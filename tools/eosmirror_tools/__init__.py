"""eosmirror's development tools, outside the shipped package: embedded Kafka clusters (``local``),
the demo, the benchmark (``bench``) and the chaos suite (``chaos``). Installed with the dev group only."""
