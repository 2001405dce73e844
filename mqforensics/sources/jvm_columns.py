"""Spark expressions without a SQL name, built through the JVM of a classic session.

Spark Connect has no JVM on the client: there every function here returns None, and callers
fall back to what SQL offers. So does a JVM whose Spark lacks the expression (another version).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession


def hive_hash(column: Column, spark: SparkSession) -> Column | None:
    """Spark's ``HiveHash`` of one column: for a string, ``h = 31 * h + b`` over its UTF-8 bytes
    (signed, from 0; ``HiveHasher.hashUnsafeBytes``), generated code where ``reflect`` is
    interpreted per row. Null for a null value. None when it cannot be built (see the module
    docstring)."""
    from py4j.protocol import Py4JError

    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return None
    try:
        from pyspark.sql.classic.column import Column as ClassicColumn

        jvm = spark.sparkContext._jvm
        assert jvm is not None
        utils = jvm.org.apache.spark.sql.classic.ExpressionUtils
        child = utils.expression(column._jc)  # type: ignore[attr-defined]
        children = jvm.org.apache.spark.api.python.PythonUtils.toSeq(jvm.java.util.List.of(child))
        expression = jvm.org.apache.spark.sql.catalyst.expressions.HiveHash(children)
        return ClassicColumn(utils.column(expression))
    except (Py4JError, ImportError, AttributeError, TypeError):
        return None
