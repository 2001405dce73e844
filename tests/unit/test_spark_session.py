"""The session every entry point uses: loopback only, this interpreter, UTC, our sources."""

import os
import subprocess
import sys

import pytest
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition


def test_local_session_is_bound_to_loopback_in_utc(spark):
    assert spark.conf.get("spark.driver.host") == "127.0.0.1"
    assert spark.conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"


def test_dataframe_calls_send_no_call_sites_to_the_jvm(spark, monkeypatch):
    """PySpark's call-site capture (eight py4j round trips per DataFrame call) is off."""
    import py4j.clientserver
    from pyspark.errors.utils import is_debugging_enabled
    from pyspark.sql import functions as F

    sent: list[str] = []
    send = py4j.clientserver.ClientServerConnection.send_command

    def recording(connection, command):
        sent.append(command)
        return send(connection, command)

    monkeypatch.setattr(py4j.clientserver.ClientServerConnection, "send_command", recording)
    assert spark.range(3).select((F.col("id") + F.lit(1)).alias("next")).columns == ["next"]
    assert sent and not [c for c in sent if "PySparkCurrentOrigin" in c]
    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert is_debugging_enabled() is False


@pytest.mark.parametrize(("value", "expected"), [(None, "false"), ("0", "false"), ("1", "true")])
def test_call_sites_are_kept_when_asked(monkeypatch, value, expected):
    from mqforensics.spark import _call_sites

    if value is None:
        monkeypatch.delenv("MQF_SPARK_CALL_SITES", raising=False)
    else:
        monkeypatch.setenv("MQF_SPARK_CALL_SITES", value)
    assert _call_sites() == expected


def test_python_workers_run_this_interpreter(spark):
    assert os.path.realpath(os.environ["PYSPARK_PYTHON"]) == os.path.realpath(sys.executable)
    worker = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("sys").executable)
    assert os.path.realpath(worker.first()) == os.path.realpath(sys.executable)


def test_python_workers_import_the_installed_pyspark_not_sparks_archives(spark):
    def where(_):
        import sys

        import pyspark

        return pyspark.__file__, [p for p in sys.path if p.endswith((".zip", ".jar"))]

    module, archives = spark.sparkContext.parallelize([0], 1).map(where).first()
    import pyspark

    assert module == pyspark.__file__  # the driver's: the installed package
    assert not [a for a in archives if "pyspark" in a or "spark-core" in a]


def test_data_source_planners_import_the_installed_pyspark_not_sparks_archives(spark):
    """Spark starts its planners with PySpark's own daemon, not ours: the driver JVM's
    ``PYTHONPATH`` names `WORKER_SITE`, whose ``sitecustomize`` drops the archives there.
    The reader's `partitions` runs in ``pyspark.sql.worker.plan_data_source_read``; its one
    partition carries what that process saw into the row the task reads. (Classes of the test
    itself: cloudpickle sends them whole, as this test module is not importable there.)"""
    import pyspark

    class PlannerPathReader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            import sys

            import pyspark

            archives = [p for p in sys.path if p.endswith((".zip", ".jar"))]
            return [InputPartition((pyspark.__file__, archives))]

        def read(self, partition):
            yield partition.value

    class PlannerPath(DataSource):
        @classmethod
        def name(cls) -> str:
            return "mqf_test_planner_path"

        def schema(self) -> str:
            return "module string, archives array<string>"

        def reader(self, schema):
            return PlannerPathReader()

    spark.dataSource.register(PlannerPath)
    [row] = spark.read.format(PlannerPath.name()).load().collect()
    assert row.module == pyspark.__file__  # the driver's: the installed package
    assert not [a for a in row.archives if "pyspark" in a or "spark-core" in a]


def test_the_worker_site_drops_sparks_archives_then_runs_the_sitecustomize_it_shadows(tmp_path):
    """A Python process started with Spark's archives first on its path, then `WORKER_SITE`,
    then a folder with another ``sitecustomize``: the installed PySpark is imported, and the
    other ``sitecustomize`` still runs."""
    import pyspark

    from mqforensics.spark.archive import spark_home
    from mqforensics.spark.daemon import WORKER_SITE, worker_python_path

    lib = spark_home() / "python" / "lib"
    archives = [str(lib / "pyspark.zip"), *map(str, lib.glob("py4j-*.zip"))]
    assert all(map(os.path.isfile, archives))
    other = tmp_path / "site"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['SHADOWED_RAN'] = 'yes'\n")
    path = os.pathsep.join([*archives, worker_python_path(str(other))])
    assert path.split(os.pathsep)[-2:] == [WORKER_SITE, str(other)]
    probe = "import os, pyspark; print(pyspark.__file__, os.environ.get('SHADOWED_RAN'))"
    done = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": path},
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert done.stdout.split() == [pyspark.__file__, "yes"]
    assert done.stderr == ""
    # Without it, Spark's archive is what a worker imports.
    done = subprocess.run([sys.executable, "-c", probe],
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(archives)},
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert done.stdout.split() == [f"{archives[0]}/pyspark/__init__.py", "None"]


def test_spark_archives_are_dropped_only_for_the_same_installed_pyspark(tmp_path):
    import zipfile

    from mqforensics.spark.daemon import unarchived_path

    installed = tmp_path / "site-packages"
    (installed / "pyspark").mkdir(parents=True)
    (installed / "pyspark" / "version.py").write_text('__version__: str = "4.1.4"\n')
    archive = tmp_path / "lib" / "pyspark.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("pyspark/version.py", '__version__: str = "4.1.4"\n')
    py4j = str(tmp_path / "lib" / "py4j-0.10.9.9-src.zip")
    jar = str(tmp_path / "spark-core_2.13.jar")
    user = str(tmp_path / "deps.zip")  # a user's archive stays
    path = [str(tmp_path), str(archive), py4j, jar, user, str(installed)]
    assert unarchived_path(path) == [str(tmp_path), user, str(installed)]
    # Another installed version, or none: the path is left as Spark made it.
    (installed / "pyspark" / "version.py").write_text('__version__: str = "4.0.0"\n')
    assert unarchived_path(path) == path
    assert unarchived_path([str(archive), py4j]) == [str(archive), py4j]


def test_local_driver_runs_the_throughput_collector_and_splits_files_per_core(spark):
    collectors = {
        bean.getName()
        for bean in spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    }
    assert collectors == {"PS Scavenge", "PS MarkSweep"}  # -XX:+UseParallelGC, not G1
    assert spark.conf.get("spark.sql.files.minPartitionNum") == str(4 * os.cpu_count())


def test_joins_may_hash_when_every_shuffled_partition_fits_a_tasks_memory(spark):
    from mqforensics.spark import hash_join_limit

    limit = spark.conf.get("spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold")
    settings = {
        "spark.master": spark.conf.get("spark.master"),
        "spark.driver.memory": spark.conf.get("spark.driver.memory", None),
    }
    assert int(limit) == hash_join_limit(settings) > 0
    # Spark hashes only when its partition target is within the limit too.
    target = spark.conf.get("spark.sql.adaptive.advisoryPartitionSizeInBytes")
    assert int(target.removesuffix("b")) <= int(limit)


@pytest.mark.parametrize(
    ("current", "limit", "expected"),
    [
        (None, 52 * 1024**2, 52 * 1024**2),  # Spark's 64 MiB default, above the limit
        ("67108864b", 14 * 1024**2, 14 * 1024**2),
        ("16m", 52 * 1024**2, None),  # a smaller target of the user's is kept
        ("64m", 256 * 1024**2, None),
        (None, 0, None),  # a heap below Spark's reserve: nothing hashes, and 0 is no target
    ],
)
def test_the_partition_target_is_lowered_to_a_positive_limit(current, limit, expected):
    from mqforensics.spark import lowered_partition_target

    assert lowered_partition_target(current, limit) == expected


def test_an_anti_join_of_small_shuffled_partitions_is_hashed_not_sorted(spark):
    from pyspark.sql import functions as F

    keys = spark.range(0, 20_000, numPartitions=4).select(F.col("id").alias("k"))
    markers = spark.range(0, 20_000, 2, numPartitions=4).select(F.col("id").alias("k"))
    names = (
        "spark.sql.autoBroadcastJoinThreshold",
        "spark.sql.adaptive.autoBroadcastJoinThreshold",
    )
    saved = {name: spark.conf.get(name, None) for name in names}
    try:
        for name in names:  # both sides are tiny: they would be sent to every task instead
            spark.conf.set(name, "-1")
        live = keys.join(markers, "k", "left_anti")
        assert len(live.collect()) == 10_000
        plan = live._jdf.queryExecution().executedPlan().toString()
    finally:
        for name, value in saved.items():
            spark.conf.unset(name) if value is None else spark.conf.set(name, value)
    final = plan.split("== Initial Plan ==")[0]
    assert "ShuffledHashJoin" in final and "SortMergeJoin" not in final, plan


def test_a_large_shuffle_gets_partitions_within_the_partition_target(spark):
    from mqforensics.spark import shuffle_partitions

    assert spark.conf.get("spark.sql.shuffle.partitions") == "8"
    target = int(spark.conf.get("spark.sql.adaptive.advisoryPartitionSizeInBytes").rstrip("b"))
    assert shuffle_partitions(spark, 0) == shuffle_partitions(spark, 8 * target) == 8
    assert shuffle_partitions(spark, 8 * target + 1) == 9
    assert shuffle_partitions(spark, 100 * target) == 100


MIB = 1024**2


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        # (heap - 300 MiB reserved) x 0.6 of it for execution, shared by the tasks at once, /16
        ({"spark.master": "local[2]", "spark.driver.memory": "1g"}, int(724 * MIB * 0.6 / 2 / 16)),
        ({"spark.master": "local[2]"}, int(724 * MIB * 0.6 / 2 / 16)),  # Spark's default heap
        ({"spark.master": "local[2]", "spark.driver.memory": "3g"}, int(2772 * MIB * 0.6 / 32)),
        ({"spark.master": "local[2,3]", "spark.driver.memory": "3072m"},
         int(2772 * MIB * 0.6 / 32)),
        ({"spark.master": "local", "spark.driver.memory": "2g"}, int(1748 * MIB * 0.6 / 16)),
        ({"spark.master": "local[4]", "spark.driver.memory": "3g", "spark.memory.fraction": "0.3"},
         int(2772 * MIB * 0.3 / 4 / 16)),
        # A cluster: the executors' heap and cores, not the driver's; 8 cores when unsaid.
        ({"spark.master": "spark://h:7077", "spark.driver.memory": "64g",
          "spark.executor.memory": "4g", "spark.executor.cores": "2"}, int(3796 * MIB * 0.6 / 32)),
        ({"spark.master": "spark://h:7077", "spark.executor.memory": "4g"},
         int(3796 * MIB * 0.6 / 8 / 16)),
        # Never more than 256 MiB; nothing to hash with a heap below Spark's reserve.
        ({"spark.master": "local[2]", "spark.driver.memory": "64g"}, 256 * MIB),
        ({"spark.master": "local[2]", "spark.driver.memory": "256m"}, 0),
    ],
)  # fmt: skip
def test_the_hash_join_limit_is_a_share_of_a_tasks_memory(settings, expected):
    from mqforensics.spark import hash_join_limit

    assert hash_join_limit(settings) == expected


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"spark.master": "local[2]", "spark.driver.memory": "3g"}, int(2772 * MIB * 0.6 / 2)),
        ({"spark.master": "local[*]"}, int(724 * MIB * 0.6 / 2)),  # Spark's default heap
        ({"spark.master": "local[2]", "spark.driver.memory": "3g", "spark.memory.fraction": "0.3"},
         int(2772 * MIB * 0.3 / 2)),
        # A cluster: the smaller of the driver, which builds it, and an executor, which holds it.
        ({"spark.master": "spark://h:7077", "spark.driver.memory": "64g",
          "spark.executor.memory": "4g"}, int(3796 * MIB * 0.6 / 2)),
        ({"spark.master": "spark://h:7077", "spark.executor.memory": "8g"},
         int(724 * MIB * 0.6 / 2)),
        ({"spark.master": "local[2]", "spark.driver.memory": "256m"}, 0),
    ],
)  # fmt: skip
def test_the_broadcast_limit_is_a_share_of_the_memory_spark_manages(settings, expected):
    from mqforensics.spark import broadcast_limit

    assert broadcast_limit(settings) == expected


def test_local_star_counts_this_machines_cores():
    from mqforensics.spark import hash_join_limit

    cores = os.cpu_count()
    expected = int(724 * MIB * 0.6 / cores / 16)
    assert hash_join_limit({"spark.master": "local[*]", "spark.driver.memory": "1g"}) == expected
