"""The one shape of an eosmirror log line, for every process that sets up logging: the CLI, the Spark driver and
its slots, the run server and its client, the dev tools."""

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
