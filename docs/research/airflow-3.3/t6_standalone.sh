#!/usr/bin/env bash
# Start `airflow standalone` in a custom AIRFLOW_HOME, wait (bounded) for the api-server, query it, kill it.
set -u
export AIRFLOW_HOME=/tmp/aflab/home_sa
export PATH=/work/main/.venv/bin:$PATH
export PYTHONPATH=/tmp/aflab/pylib
export AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type":"spark","host":"local[2]"}'
LOG=/tmp/aflab/standalone.log
start=$(date +%s)
setsid airflow standalone > "$LOG" 2>&1 &
PID=$!
echo "standalone pid=$PID (process group)"
ok=0
for i in $(seq 1 120); do
  if curl -sf http://localhost:18080/api/v2/monitor/health > /tmp/aflab/health.json; then ok=1; break; fi
  sleep 1
done
echo "api up=$ok after $(( $(date +%s) - start ))s"; cat /tmp/aflab/health.json; echo
# get a JWT from the simple auth manager and list DAGs
PW=$(python -c "import json;print(json.load(open('$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated'))['admin'])" 2>/dev/null)
echo "password file: $(ls $AIRFLOW_HOME/simple_auth_manager_passwords.json.generated 2>&1)"
TOKEN=$(curl -sf -X POST http://localhost:18080/auth/token -H 'Content-Type: application/json' -d "{\"username\":\"admin\",\"password\":\"$PW\"}" | python -c "import sys,json;print(json.load(sys.stdin)['access_token'])")
sleep 15  # give the dag-processor a moment to parse
curl -sf http://localhost:18080/api/v2/dags -H "Authorization: Bearer $TOKEN" | python -c "import sys,json;d=json.load(sys.stdin);print('DAGS', [x['dag_id'] for x in d['dags']])"
curl -sf http://localhost:18080/api/v2/importErrors -H "Authorization: Bearer $TOKEN" | python -c "import sys,json;d=json.load(sys.stdin);print('IMPORT_ERRORS', d['total_entries'])"
kill -TERM -- -$PID; sleep 5; kill -KILL -- -$PID 2>/dev/null; wait $PID 2>/dev/null
echo "stopped; leftover: $(pgrep -g $PID 2>/dev/null | wc -l)"
