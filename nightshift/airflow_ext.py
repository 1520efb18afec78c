"""Airflow pieces of the DAG factory: the spark-submit operator that hands a task the warehouse
credentials, which DAG tasks take from an Airflow connection ([warehouse] airflow_conn_id), and whose task
log is as quiet as `nightshift run` (nightshift's progress lines, Spark's errors).

Imported only by dags/ and Airflow workers: the CLI never imports Airflow.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from urllib.parse import quote

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from runtime.errors import ERROR_PREFIX, REFUSED_EXIT, RETRY_CANNOT_FIX, ConfigError, NightshiftError
from nightshift import config
from runtime.lake import Lake
from spark_jobs.packages import delta_conf

WAREHOUSE_URL_ENV = "NIGHTSHIFT_WAREHOUSE_URL"  # nightshift.config lets it override [warehouse] url
# libpq connection parameters a PostgreSQL connection's extras may carry into the URL; the rest of the
# extras (cursor, iam, aws_conn_id, ...) mean something to Airflow's PostgresHook only.
_LIBPQ_EXTRAS = frozenset({
    "options", "sslmode", "sslrootcert", "sslcert", "sslkey", "sslcrl", "sslpassword", "sslsni", "channel_binding",
    "gssencmode", "application_name", "connect_timeout", "target_session_attrs", "client_encoding",
    "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout",
})


# ---------------------------------------------------------------- warehouse credentials


def load_project(root: str | Path, layer: str = "applied") -> config.Project:
    """nightshift.config.load_project for code running inside an Airflow task: when the project names
    [warehouse] airflow_conn_id and NIGHTSHIFT_WAREHOUSE_URL is not set, the warehouse URL comes from that
    Airflow connection (so the password lives in Airflow's connections or secrets backend, not in the project).
    Its summary layer is the applied one (a DAG task is a night step); layer="working" reads the working files."""
    project = config.load_project(root, layer)
    url = warehouse_url_override(project.warehouse_conn_id)
    return dataclasses.replace(project, warehouse_url=url) if url else project


def warehouse_url_override(conn_id: str) -> str | None:
    """The warehouse URL from Airflow connection `conn_id`, or None when there is nothing to override:
    no conn id, or NIGHTSHIFT_WAREHOUSE_URL is set (the environment wins, as everywhere in nightshift)."""
    if not conn_id or os.environ.get(WAREHOUSE_URL_ENV):
        return None
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = BaseHook.get_connection(conn_id)  # the Task SDK registers conn.password with the secrets masker
    except AirflowNotFoundException:
        raise ConfigError(
            f"[warehouse] airflow_conn_id = {conn_id!r}: Airflow has no connection {conn_id!r}; add it "
            f"(Admin > Connections, `airflow connections add`, or AIRFLOW_CONN_{conn_id.upper()}) or set {WAREHOUSE_URL_ENV}"
        ) from None
    return connection_url(conn)


def connection_url(conn) -> str:
    """A PostgreSQL Airflow connection as the SQLAlchemy URL nightshift's warehouse takes
    (postgresql+psycopg://login:password@host:port/schema?<libpq extras such as options>). The password,
    URL-quoted as well, and the whole URL are registered with Airflow's secrets masker: task logs and
    rendered fields show *** instead."""
    from airflow.sdk.log import mask_secret
    from sqlalchemy.engine import URL

    if (conn.conn_type or "").lower() not in ("postgres", "postgresql"):
        raise ConfigError(
            f"Airflow connection {conn.conn_id!r} has type {conn.conn_type!r}: [warehouse] airflow_conn_id supports "
            f"PostgreSQL connections (type postgres); a DuckDB warehouse is a file: use [warehouse] url"
        )
    extras = {k: str(v) for k, v in conn.extra_dejson.items() if k in _LIBPQ_EXTRAS}
    url = URL.create("postgresql+psycopg", username=conn.login or None, password=conn.password or None,
                     host=conn.host or None, port=conn.port or None, database=conn.schema or None, query=extras)
    text = url.render_as_string(hide_password=False)
    if conn.password:
        mask_secret(conn.password)
        mask_secret(quote(conn.password, safe=""))
    mask_secret(text)
    return text


class NightshiftSparkSubmit(SparkSubmitOperator):
    """SparkSubmitOperator for nightshift/submit.py that hands the child the warehouse URL of Airflow
    connection `warehouse_conn_id` in NIGHTSHIFT_WAREHOUSE_URL. A step whose output is complete ends at
    once; with [spark] remote (a warm Spark Connect server) the step runs in the task's own process,
    without spark-submit.

    The URL is resolved in execute(), after Airflow rendered and stored the template fields, so the
    rendered-template view never holds it; env_vars is restored afterwards. With a local or client-mode
    master, SparkSubmitHook passes env_vars to the spark-submit process environment only (never its command
    line or log); on YARN and Kubernetes it becomes a --conf in the logged command, where the secrets masker
    hides the password (registered by connection_url). Spark standalone in cluster deploy mode refuses
    env_vars: run propagate/apply-base in client mode (the default).
    """

    def __init__(self, *, warehouse_conn_id: str = "", **kwargs):
        # the lake's Delta tables: every spark-submit loads Delta (the task's own conf wins)
        kwargs["conf"] = {**delta_conf(), **(kwargs.get("conf") or {})}
        super().__init__(**kwargs)
        self.warehouse_conn_id = warehouse_conn_id

    def _get_hook(self):
        """spark-submit with the logging `nightshift run` has (spark_jobs.session.get_spark): in client mode
        (the default: the driver is spark-submit's own JVM) the driver gets the Java options a command's own
        Spark gets (driver_java_options: the quiet log4j2 configuration unless NIGHTSHIFT_VERBOSE=1, the class-data
        archive, the quick compiler alone for a local master over a small lake), unless the task's conf sets them
        itself; and the JVM's start-up notice, printed before any logging configuration, stays out of the task log.
        Cluster deploy mode keeps spark-submit's own logging: the hook follows the driver's status in it."""
        # PySpark: not at parse time
        from spark_jobs.session import DRIVER_JAVA_OPTIONS, JVM_NOISE, driver_java_options, quick_jit

        hook = super()._get_hook()
        if hook._connection.get("deploy_mode") != "cluster" and DRIVER_JAVA_OPTIONS not in hook._conf:
            quick = quick_jit(hook._connection.get("master"), getattr(self, "_lake", None))
            options = driver_java_options(quick=quick)
            if options:
                hook._conf = {**hook._conf, DRIVER_JAVA_OPTIONS: options}
        process = hook._process_spark_submit_log
        hook._process_spark_submit_log = lambda lines: process(self._errors_seen(line for line in lines
                                                                                if not JVM_NOISE.match(line)))
        return hook

    def _errors_seen(self, lines):
        """The spark-submit log's lines, passed on; the step's own error line (submit.py prints it) is kept."""
        self._error = None
        for line in lines:
            if line.startswith(ERROR_PREFIX):
                self._error = line.strip()[len(ERROR_PREFIX):]
            yield line

    def _step(self) -> tuple[str, str, str, int | None]:
        """(step, project folder, batch, level) of the rendered application_args."""
        args = [str(a) for a in self.application_args or ()]
        value = lambda flag: args[args.index(flag) + 1] if flag in args else None  # noqa: E731
        level = value("--level")
        return args[0], value("--project"), value("--batch"), int(level) if level is not None else None

    def finished(self, project: config.Project, step: str, batch: str, level: int | None) -> str | None:
        """Why the step has nothing left to do (nightshift.cycle.Cycle.finished: the lake and the ledger say
        its output for this batch is complete), so the task ends at once without starting Spark; None
        when it must run."""
        if step not in ("propagate", "apply-base", "compact"):
            return None
        from nightshift.cycle import Cycle

        cycle = Cycle(project, progress=print)
        try:
            return cycle.finished(step, batch, level)
        finally:
            cycle.close()

    def execute(self, context):
        try:
            return self._execute(context)
        except RETRY_CANNOT_FIX as e:  # in the task (the batch's order before any Spark, a step on the server)
            raise not_retried(e) from None

    def _execute(self, context):
        step, root, batch, level = self._step()
        project = load_project(root)  # the applied layer; the warehouse URL from the Airflow connection
        self._lake = Lake(project.lake)  # its size decides the driver's compiler (_get_hook)
        done = self.finished(project, step, batch, level)
        if done:
            print(f"{step}: skipped ({done}); no Spark job started")
            return None
        if project.spark_remote:  # a warm Spark Connect server: run the step here, no spark-submit
            from nightshift.render import plain
            from nightshift.submit import run_step

            try:
                print(run_step(project, step, batch, level))
            except RETRY_CANNOT_FIX:
                raise  # execute() fails the task without retries
            except NightshiftError as e:
                raise RuntimeError(plain(str(e))) from None
            return None
        url = warehouse_url_override(self.warehouse_conn_id)
        rendered = self.env_vars
        if url is not None:
            self.env_vars = {**(rendered or {}), WAREHOUSE_URL_ENV: url}
        try:
            return super().execute(context)
        except Exception:
            submitted = getattr(self._hook, "_submit_sp", None)
            if submitted is not None and submitted.returncode == REFUSED_EXIT:  # submit.py: a retry cannot fix it
                raise not_retried(getattr(self, "_error", None) or f"{step} {batch} refused the night") from None
            raise
        finally:
            self.env_vars = rendered


def not_retried(error) -> Exception:
    """The failure of a DAG task whose step refused the night (runtime.errors.RETRY_CANNOT_FIX: a bad change batch,
    a batch out of order, a changed plan, a warehouse not in the state the step needs): Airflow fails the task
    without its retries, which would meet the same refusal; the message is the step's own, which names what to fix."""
    from airflow.exceptions import AirflowFailException
    from nightshift.render import plain

    return AirflowFailException(f"{plain(str(error))} (not retried: a retry meets the same refusal; fix the cause, "
                                f"then clear the task)")
