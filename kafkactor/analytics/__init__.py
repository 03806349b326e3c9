"""Spark analytics over kafkactor event logs (`kafkactor analyze`).

`analyze(inputs, out_dir)` reads JSON-lines event logs (docs/events.md) with an explicit
schema, caches the parsed events once and writes every table of `TABLES` as Parquet, a
Markdown report and PNG plots; docs/analytics.md describes each table and number.

Modules, one job each: `schema` (the Spark schema of one line), `session` (the SparkSession),
`inputs` (files, directories, globs), `load` (reading, corrupt lines, the cache), `tables`
(one DataFrame transform per table), `transactions` (the transaction tables), `digest`
(reading the tables back, key numbers), `report` (Markdown; `markdown` its pieces,
`txn_report` its transactions section), `plots` (matplotlib PNGs), `progress` (the stderr
progress line) and `pipeline` (`analyze` itself).

PySpark and matplotlib are the `analytics` extra (`pip install 'kafkactor[analytics]'`): the
rest of kafkactor never imports this package, and importing it without them raises
`ModuleNotFoundError` naming the missing module and the extra.
"""

try:
    from kafkactor.analytics.pipeline import AnalysisResult, analyze
    from kafkactor.analytics.schema import EVENT_SCHEMA
    from kafkactor.analytics.session import spark_session
    from kafkactor.analytics.tables import TABLES
except ModuleNotFoundError as error:
    _missing = (error.name or "").partition(".")[0]
    if _missing not in {"pyspark", "py4j", "matplotlib"}:
        raise
    raise ModuleNotFoundError(
        f"kafkactor.analytics needs the analytics extra ({_missing} is not installed): "
        "pip install 'kafkactor[analytics]'",
        name=_missing,
    ) from error

__all__ = ["EVENT_SCHEMA", "TABLES", "AnalysisResult", "analyze", "spark_session"]
