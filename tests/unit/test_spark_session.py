"""The session every entry point uses: loopback only, this interpreter, UTC, our sources."""

import os
import sys


def test_local_session_is_bound_to_loopback_in_utc(spark):
    assert spark.conf.get("spark.driver.host") == "127.0.0.1"
    assert spark.conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"


def test_python_workers_run_this_interpreter(spark):
    assert os.path.realpath(os.environ["PYSPARK_PYTHON"]) == os.path.realpath(sys.executable)
    worker = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("sys").executable)
    assert os.path.realpath(worker.first()) == os.path.realpath(sys.executable)


def test_local_driver_runs_the_throughput_collector_and_splits_files_per_core(spark):
    collectors = {
        bean.getName()
        for bean in spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    }
    assert collectors == {"PS Scavenge", "PS MarkSweep"}  # -XX:+UseParallelGC, not G1
    assert spark.conf.get("spark.sql.files.minPartitionNum") == str(4 * os.cpu_count())


def test_joins_may_hash_when_every_shuffled_partition_is_small(spark):
    from mqforensics.spark import HASH_JOIN_LIMIT

    limit = spark.conf.get("spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold")
    assert limit == HASH_JOIN_LIMIT
