"""The training job of the Spark class archive (classarchive.py): what a mirror run's driver JVM
does, without Kafka: start a SparkContext, run one job of one Python task in a job group, stop."""


def main() -> None:
    from pyspark import SparkConf, SparkContext  # spark-submit runs this file; nothing imports it

    sc = SparkContext.getOrCreate(SparkConf())
    sc.setJobGroup("eosmirror-class-archive", "eosmirror: training the Spark class archive", interruptOnCancel=True)
    if sc.parallelize([1], 1).map(lambda x: x + 1).collect() != [2]:
        raise SystemExit("the training job's one task returned a wrong result")
    sc.stop()


if __name__ == "__main__":
    main()
