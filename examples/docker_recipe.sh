#!/usr/bin/env bash
# The container recipe of docs/bridge.md ("Giving the container the sockets, the tokens and the
# clients"), as a script: start a candidate session, run one evaluation from inside a container
# that holds no credentials and has no network, tear the session down.
#
#   examples/docker_recipe.sh [SLURM_TOML]
#
# With a slurm.toml (the argument or $VIBESYS_SLURM_CONFIG) the evaluation is an sbatch job on
# that cluster; without, it runs on this host (`--local`, confined by bubblewrap). It uses docker
# when its engine answers, else podman (rootless: `--userns=keep-id`, so that the container's
# processes are the session's uid, which the owner-only sockets require). With neither, it says
# so and exits 0 without starting anything. The journal goes to $VIBESYS_JOURNAL, else into the
# script's temporary directory, which it keeps (the results). IMAGE picks the image (default python:3.11-slim:
# any image with python3 runs the helper); VIBESYS the vibesys command (default `vibesys`).
#
# The tests run it with a stand-in `docker` that checks what it mounts and passes, then runs the
# command on the host (tests/test_examples.py): the machine they run on has no container engine.
# examples/agent_loop/ runs the same loop with bubblewrap as the container.
set -euo pipefail

IMAGE=${IMAGE:-python:3.11-slim}
read -r -a VIBESYS <<<"${VIBESYS:-vibesys}"

if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  ENGINE=(docker run --user "$(id -u):$(id -g)")
elif command -v podman >/dev/null && podman info >/dev/null 2>&1; then
  ENGINE=(podman run --userns=keep-id)
else
  echo "docker_recipe.sh: skipped: no docker or podman engine answers here (docker info, podman info)"
  exit 0
fi

SLURM_TOML=${1:-${VIBESYS_SLURM_CONFIG:-}}
if [ -n "$SLURM_TOML" ]; then
  SITE=(--slurm-config "$SLURM_TOML" --default-timeout 300)
else
  echo "site: this host (--local): no slurm.toml given as an argument or \$VIBESYS_SLURM_CONFIG"
  SITE=(--local)
fi

WORK=$(mktemp -d -t vibesys-docker-recipe.XXXXXX)
WORKSPACE=$WORK/workspace STATE=$WORK/session
mkdir -p "$WORKSPACE"
cat >"$WORKSPACE/eval.py" <<'EOF'
import json, os
os.makedirs("out", exist_ok=True)
json.dump({"accuracy": 0.93}, open("out/metrics.json", "w"))
print("accuracy 0.93")
EOF

# The session serves in the background; its document (a secret: it holds the tokens) goes to
# an owner-only file. Whichever way this script ends, the session is torn down.
umask 077
"${VIBESYS[@]}" session serve --run-id docker-recipe --workspace "$WORKSPACE" \
  --state-dir "$STATE" --journal "${VIBESYS_JOURNAL:-$WORK/journal.db}" "${SITE[@]}" \
  >"$WORK/session.json" 2>"$WORK/session.log" &
SERVE=$!
stop() {
  kill -TERM "$SERVE" 2>/dev/null || true
  wait "$SERVE" 2>/dev/null || true
}
trap stop EXIT

# Serving once its document is whole (it ends with "}"); a serve that exits has failed.
for _ in $(seq 600); do
  if [ "$(tail -c 2 "$WORK/session.json")" = "}" ]; then break; fi
  if ! kill -0 "$SERVE" 2>/dev/null; then
    echo "the session did not start:" >&2
    tail -5 "$WORK/session.log" >&2
    exit 2
  fi
  sleep 0.1
done
# The helpers' paths, one a line: the bridge's, then the GPU broker's (empty without one).
mapfile -t CLIENTS < <(python3 -c '
import json, sys
doc = json.load(open(sys.argv[1]))
print(doc["bridge"]["client"])
print(doc["gpu"]["client"] if doc["gpu"] else "")' "$WORK/session.json")

# The recipe: the workspace and the socket directories at their host paths, the results and
# the helpers read-only, the environment file; never the token files. No network: the helper
# reaches the bridge through its Unix socket.
VOLUMES=(-v "$WORKSPACE:$WORKSPACE" -v "$STATE/eval:$STATE/eval")
VOLUMES+=(-v "$STATE/results:$STATE/results:ro" -v "${CLIENTS[0]}:${CLIENTS[0]}:ro")
if [ -n "${CLIENTS[1]}" ]; then
  VOLUMES+=(-v "$STATE/gpu:$STATE/gpu" -v "${CLIENTS[1]}:${CLIENTS[1]}:ro")
fi

status=0
"${ENGINE[@]}" --rm --network none "${VOLUMES[@]}" --env-file "$STATE/container.env" \
  -w "$WORKSPACE" "$IMAGE" \
  sh -c 'python3 "$VIBESYS_EVAL" --kind accuracy --artifact "out/*.json" -- python3 eval.py' \
  || status=$?
echo "vibesys-eval in the container exited $status"
stop
trap - EXIT
echo "session closed; its log, results and journal stay in $WORK"
exit "$status"
