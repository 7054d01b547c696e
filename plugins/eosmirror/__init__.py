"""eosmirror: exactly-once Kafka mirror."""
