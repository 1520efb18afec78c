"""Spark kept warm between commands: the Spark Connect server that `nightshift spark-connect start|stop|status`
(and `make spark-connect`) runs.

Without it every command and every Airflow task that runs a Spark step starts Spark (a JVM: seconds) and stops it
again. A project with [spark] remote = "sc://127.0.0.1:15002" (or NIGHTSHIFT_SPARK_REMOTE) opens a session of this
long-lived server instead (spark_jobs.session.connect_session): the step's queries run in the server's JVM, which
is already up and warm, and reads and writes the same local paths (the server runs on this machine).

start launches `spark-submit --class SparkConnectServer spark-internal` from the installed pyspark (its package is
SPARK_HOME; the wheel holds the Spark Connect server), bound to 127.0.0.1 only (Spark Connect has no
authentication), with the settings a local session gets (spark_jobs.session.server_conf: nightshift's defaults, the
quiet logging, NIGHTSHIFT_SPARK_CONF) and an event log for the rows-read figures of the manifest
(spark_jobs.metrics.server_log_conf), and returns once the port answers. The folder (default .spark-connect in the
current folder, or NIGHTSHIFT_SPARK_CONNECT_DIR) holds server.json (the URL, the process id, the master),
server.log and events/. The server leads its own process group; stop ends exactly that group, after checking that
the recorded process still runs the server.

A new server's JVM has compiled none of Spark's planning code yet: its first night takes two to three times as
long as its second, and it keeps getting faster over about a dozen nights. start --warm-up (make spark-connect uses it)
runs the retail example's first two nights (WARM_UP_ROWS point-of-sale rows) against the server before it
returns, in a scratch project under the folder that goes afterwards, so that the first real night finds the
server warm. A warm-up that fails leaves the server running (cold) and says why.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark

from runtime.errors import ConfigError
from spark_jobs.metrics import server_log_conf
from spark_jobs.session import answers, server_conf

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
HOST = "127.0.0.1"
WARM_UP_ROWS = 20_000
# settings of the caller's environment the warm-up's scratch project must not take: a warehouse URL would send the
# example's summary tables to the caller's warehouse
SCRATCH_UNSET = ("NIGHTSHIFT_WAREHOUSE_URL", "NIGHTSHIFT_CRASH_AT", "NIGHTSHIFT_CRASH_ONCE", "NIGHTSHIFT_PAUSE_AT")


def command(args) -> int:
    """nightshift spark-connect start|stop|status (nightshift.cli)."""
    folder = Path(args.dir).resolve()
    if args.action == "start":
        state, started = start(folder, args.port, args.master, args.timeout)
        if started:
            print(f"spark-connect: started {state['url']} (master {state['master']}, pid {state['pid']}, "
                  f"{state['seconds']:.1f}s); log {state['log']}", flush=True)
            if args.warm_up:
                print(f"spark-connect: warming up: the retail example's first two nights ({WARM_UP_ROWS:,} pos rows) "
                      f"against the server", flush=True)
                seconds, problem = warm_up(folder, state["url"])
                if problem is None:
                    print(f"spark-connect: warmed up in {seconds:.1f}s")
                else:
                    print(f"spark-connect: warning: the warm-up failed after {seconds:.1f}s, the server runs but is "
                          f"cold: {problem}", file=sys.stderr)
        else:
            print(f"spark-connect: already running at {state['url']} (master {state['master']}, pid {state['pid']})")
        print(f"spark-connect: use it with [spark] remote = \"{state['url']}\" in nightshift.toml, or "
              f"NIGHTSHIFT_SPARK_REMOTE={state['url']}; stop it with nightshift spark-connect stop")
        print(state["url"])
        return 0
    if args.action == "stop":
        state = stop(folder)
        print(f"spark-connect: stopped {state['url']} (pid {state['pid']})" if state else
              f"spark-connect: not running (nothing recorded in {folder})")
        return 0
    state = running(folder)
    if state is None:
        print(f"spark-connect: not running (nothing recorded in {folder})")
        return 3
    print(f"spark-connect: running at {state['url']} (master {state['master']}, pid {state['pid']}, since "
          f"{state['started']}); log {state['log']}")
    return 0


def start(folder: Path, port: int, master: str, timeout: float) -> tuple[dict, bool]:
    """(the server's state, True) once a new server answers; (its state, False) when one already runs here."""
    state = running(folder)
    if state is not None:
        return state, False
    port = _free_port() if port == 0 else _check_port(port)
    folder.mkdir(parents=True, exist_ok=True)
    events = folder / "events"
    shutil.rmtree(events, ignore_errors=True)  # the last server's: its session ended with it
    events.mkdir()
    log = folder / "server.log"
    conf = {**server_conf(), **server_log_conf(events), "spark.connect.grpc.binding.address": HOST,
            "spark.connect.grpc.binding.port": str(port)}
    home = Path(pyspark.__file__).resolve().parent
    cmd = [str(home / "bin" / "spark-submit"), "--master", master, "--class", SERVER_CLASS, "--name", "nightshift-connect"]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd.append("spark-internal")
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP=HOST,
               PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON", sys.executable))
    env.pop("PYSPARK_GATEWAY_PORT", None)
    t0 = time.monotonic()
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=folder)
    state = {"url": f"sc://{HOST}:{port}", "port": port, "pid": proc.pid, "master": master, "log": str(log),
             "events": str(events), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    _write_state(folder, state)  # recorded at once: a start that fails half-way can still be stopped
    try:
        while not answers(HOST, port, timeout=1.0):
            if proc.poll() is not None:
                raise ConfigError(f"the Spark Connect server exited while starting (exit code {proc.returncode}); "
                                  f"its log {log} ends:\n{_tail(log)}")
            if time.monotonic() - t0 > timeout:
                raise ConfigError(f"the Spark Connect server did not answer on {HOST}:{port} within {timeout:.0f}s; "
                                  f"its log {log} ends:\n{_tail(log)}")
            time.sleep(0.25)
    except BaseException:
        stop(folder)
        raise
    state["seconds"] = time.monotonic() - t0
    return state, True


def warm_up(folder: Path, url: str, rows: int = WARM_UP_ROWS) -> tuple[float, str | None]:
    """Run the retail example's first two nights (`rows` pos rows, then one night of changes) against the server at
    `url`, as `nightshift run --pending` in a scratch project under `folder` that goes afterwards: the server's JVM
    compiles Spark's planning, Delta's and the night's code paths before the first real night needs them. Returns
    (seconds, None), or (seconds, what went wrong) when a night failed."""
    from nightshift.example import init_project

    scratch = folder / "warm-up"
    shutil.rmtree(scratch, ignore_errors=True)  # a warm-up cut short before
    t0 = time.monotonic()
    try:
        init_project(scratch, "retail", rows, nights=1)
        # the scratch project's own DuckDB file and no injected faults, whatever the caller's environment says
        env = {k: v for k, v in os.environ.items() if k not in SCRATCH_UNSET}
        env["NIGHTSHIFT_SPARK_REMOTE"] = url
        r = subprocess.run([sys.executable, "-m", "nightshift.cli", "run", "--project", str(scratch), "--pending"],
                           env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if r.returncode != 0:
            lines = [line for line in (r.stderr + r.stdout).splitlines() if line.strip()]
            return time.monotonic() - t0, "\n".join(lines[-5:]) or f"exit code {r.returncode}"
        return time.monotonic() - t0, None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def stop(folder: Path, grace: float = 30.0) -> dict | None:
    """End the recorded server's process group (SIGTERM, then SIGKILL after `grace` seconds); its state, or
    None when none runs. The record goes either way."""
    state = _read_state(folder)
    if state is None:
        return None
    ours = _is_ours(state["pid"])
    if ours:
        _signal(state["pid"], signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _alive(state["pid"]):
            time.sleep(0.2)
        if _alive(state["pid"]):
            _signal(state["pid"], signal.SIGKILL)
        try:
            os.waitpid(state["pid"], os.WNOHANG)  # a child of this process (a start that failed): no zombie left
        except ChildProcessError:
            pass
    (folder / "server.json").unlink(missing_ok=True)
    return state if ours else None


def running(folder: Path) -> dict | None:
    """The recorded server's state while its process runs; None otherwise."""
    state = _read_state(folder)
    return state if state is not None and _is_ours(state["pid"]) else None


def _read_state(folder: Path) -> dict | None:
    try:
        return json.loads((folder / "server.json").read_text())
    except (FileNotFoundError, ValueError):
        return None


def _write_state(folder: Path, state: dict) -> None:
    tmp = folder / "server.json.tmp"
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(folder / "server.json")


def _is_ours(pid: int) -> bool:
    """The process still runs the Spark Connect server (not a recycled process id) and leads its group."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat[stat.rindex(")") + 2:].split()  # state, ppid, pgrp, ...
    return SERVER_CLASS in cmdline and fields[0] != "Z" and int(fields[2]) == pid


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


def _signal(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _check_port(port: int) -> int:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port the last server left in TIME_WAIT is free
        try:
            s.bind((HOST, port))
        except OSError:
            raise ConfigError(f"port {HOST}:{port} is in use by another program; start the Spark Connect server on "
                              f"another one with --port N (0 picks a free port)") from None
    return port


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
