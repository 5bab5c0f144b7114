#!/usr/bin/env bash
# Real Kubernetes control planes on loopback: the test bed the hub and the simulated fleet
# are held to (docs/real-cluster.md).
#
#   scripts/real-cluster.sh build [--upstream]     build every component once per machine
#                                                  (cached); prints the directory of binaries;
#                                                  --upstream: also cluster-autoscaler
#   scripts/real-cluster.sh up DIR [--name NAME] [--provision-delay D] [--no-machines]
#                                                  [--no-cluster-api] [--no-watch-cache]
#                                                  [--large] [--owner PID]
#                                                  start one control plane; returns once it is
#                                                  ready; writes DIR/kubeconfig (context NAME)
#   scripts/real-cluster.sh down DIR               stop exactly the processes `up` started
#   scripts/real-cluster.sh restart DIR COMPONENT  stop and start one of them again
#   scripts/real-cluster.sh compact DIR            compact etcd to its current revision
#
# One control plane: etcd, kube-apiserver (RBAC on), kube-controller-manager and
# kube-scheduler built from k8s.io/kubernetes, kwok (Nodes become Ready, bound pods
# Running), the Machine API controllers production runs (OpenShift's MachineSet and nodelink
# controllers from machine-api-operator; Cluster API's core manager with its webhooks, and a
# Cluster object for the test bed itself), and the test-bed machine controller
# (`fleetscaler sim machines`) playing only the cloud: OpenShift's Machine actuator, and
# Cluster API's infrastructure provider of AWSMachines (scripts/testbed/machine-api.sh).
# The CRDs are the projects' own: OpenShift's MachineSet and Machine, Cluster API's core
# kinds (MachineDeployment/MachineSet/Machine served and stored as v1beta2 only), OpenShift's
# ClusterAutoscaler and MachineAutoscaler, the autoscaler's ProvisioningRequest (v1 and
# v1beta1); the cloud's kinds are the project's (scripts/testbed/cloud/crds.yaml).
#
# FLEETSCALER_BIN names the fleetscaler binary for the machine controller (default: built
# with cargo). --owner PID stops the control plane when that process ends, so a test that
# dies leaves nothing running.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
testbed=$here/testbed
# shellcheck source=testbed/machine-api.sh
. "$testbed/machine-api.sh"
# The Go toolchain every component is built with: pinned, since a newer Go can change what
# the apiserver serves (Go 1.27's JSON default breaks the OpenAPI document of some versions).
export GOTOOLCHAIN=go1.26.8
export GOFLAGS=-mod=readonly
k8s_version=v1.34.4

die() { echo "real-cluster: $*" >&2; exit 1; }
log() { echo "real-cluster: $*" >&2; }

cache_root() {
    echo "${FLEETSCALER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fleetscaler}"
}

# The binaries live under a key of everything that decides them, so a change of a pinned
# version rebuilds and nothing else does.
bin_dir() {
    local key
    key=$( (cat "$testbed"/*/go.mod "$testbed"/*/go.sum; echo "$GOTOOLCHAIN $(ldflags)") | sha256sum | cut -c1-12)
    echo "$(cache_root)/testbed-$key/bin"
}

ldflags() {
    local minor=${k8s_version#v1.}
    minor=${minor%%.*}
    local flags="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        flags+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
        flags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
    done
    echo "$flags"
}

# go build of `pkg` from the module in `dir` into `out`, unless already there.
build_one() {
    local dir=$1 pkg=$2 out=$3 tags=${4:-}
    [ -x "$out" ] && return
    log "building $(basename "$out") ($pkg)"
    local start=$SECONDS
    (cd "$testbed/$dir" && go build -trimpath ${tags:+-tags "$tags"} -ldflags "$(ldflags)" -o "$out.tmp" "$pkg")
    mv "$out.tmp" "$out"
    log "built $(basename "$out") in $((SECONDS - start)) s"
}

cmd_build() {
    local upstream=0
    [ "${1:-}" != --upstream ] || upstream=1
    command -v go >/dev/null || die "go is not installed (a Go toolchain builds the test bed)"
    local bin
    bin=$(bin_dir)
    mkdir -p "$bin"
    # One build at a time per machine: tests start control planes in parallel.
    exec 9>"$bin/.lock"
    flock 9
    local k=k8s.io/kubernetes/cmd
    build_one kubernetes "$k/kube-apiserver" "$bin/kube-apiserver"
    build_one kubernetes "$k/kube-controller-manager" "$bin/kube-controller-manager"
    build_one kubernetes "$k/kube-scheduler" "$bin/kube-scheduler"
    build_one kubernetes "$k/kubectl" "$bin/kubectl"
    build_one kubernetes go.etcd.io/etcd/server/v3 "$bin/etcd"
    build_one kwok sigs.k8s.io/kwok/cmd/kwok "$bin/kwok"
    # The Machine API controllers production runs: OpenShift's MachineSet and nodelink
    # controllers, and Cluster API's core manager.
    build_one mao github.com/openshift/machine-api-operator/cmd/machineset "$bin/machineset-controller"
    build_one mao github.com/openshift/machine-api-operator/cmd/nodelink-controller "$bin/nodelink-controller"
    build_one capi sigs.k8s.io/cluster-api/core "$bin/cluster-api-manager"
    if [ $upstream = 1 ] && [ ! -x "$bin/cluster-autoscaler" ]; then
        upstream_apis "$testbed/autoscaler/apis"
        build_one autoscaler k8s.io/autoscaler/cluster-autoscaler "$bin/cluster-autoscaler" clusterapi
    fi
    if [ ! -d "$bin/crds.v3" ]; then
        crds "$bin/crds.tmp"
        mv "$bin/crds.tmp" "$bin/crds.v3"
    fi
    if [ ! -f "$bin/capi-webhooks.yaml" ]; then
        local capi
        capi=$(module_dir sigs.k8s.io/cluster-api)
        [ -n "$capi" ] || die "could not download sigs.k8s.io/cluster-api"
        cp "$capi/core/config/webhook/manifests.yaml" "$bin/capi-webhooks.yaml.tmp"
        chmod u+w "$bin/capi-webhooks.yaml.tmp"
        mv "$bin/capi-webhooks.yaml.tmp" "$bin/capi-webhooks.yaml"
    fi
    # Taken from the module cache now, so that `up` never needs Go's caches.
    if [ ! -f "$bin/kwok-stages.yaml" ]; then
        kwok_config "$bin/kwok-stages.yaml.tmp"
        mv "$bin/kwok-stages.yaml.tmp" "$bin/kwok-stages.yaml"
    fi
    flock -u 9
    echo "$bin"
}

# Directory of module $1 in the module cache, as the test-bed module $2 (crds by default)
# pins it (downloaded if needed, checked against go.sum).
module_dir() {
    (cd "$testbed/${2:-crds}" && go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
}

# Upstream cluster-autoscaler's `apis` module as the commit we build imports it. The proxy
# serves that module only at the version the commit's go.mod names (and replaces with its
# own ./apis, which module zips leave out), a version whose ProvisioningRequest API is
# still called v1beta1; the commit imports the same API as v1 (and two pod annotation keys
# it gained since). So: that version, with the API renamed to v1. The autoscaler's
# decisions do not touch this API unless ProvisioningRequests are enabled (they are not).
upstream_apis() {
    local out=$1 src p
    src=$(module_dir k8s.io/autoscaler/cluster-autoscaler/apis)
    [ -n "$src" ] || die "could not download k8s.io/autoscaler/cluster-autoscaler/apis"
    rm -rf "$out"
    cp -r "$src" "$out"
    chmod -R u+w "$out"
    local pr=$out/provisioningrequest
    find "$pr" -depth -type d -name v1beta1 | while read -r d; do mv "$d" "$(dirname "$d")/v1"; done
    p=k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest
    # Paths and package clauses change; the code keeps calling the package v1beta1 (an
    # import alias), since `v1` is metav1's name in it.
    find "$pr" -name '*.go' -print0 | xargs -0 perl -pi -e '
        s{^package v1beta1$}{package v1};
        s{^(\s*)"('"$p"'[^"]*)/v1beta1(/fake)?"}{$1 . ($3 ? "fake" : "v1beta1") . " \"$2/v1$3\""}e;
        s{^(\s*\w+\s+)"('"$p"'[^"]*)/v1beta1(/fake)?"}{$1"$2/v1$3"};
        s{V1beta1}{V1}g;
        s{GroupVersion = "v1beta1"}{GroupVersion = "v1"};
        s{Version: "v1beta1"}{Version: "v1"}g;
        s{autoscaling\.x-k8s\.io/v1beta1"}{autoscaling.x-k8s.io/v1"}g;'
    cat >>"$pr/autoscaling.x-k8s.io/v1/types.go" <<'GO'

// Pod annotations of the v1 API (added by fleetscaler's test bed, as v1 defines them).
const (
	ProvisioningRequestPodAnnotationKey = "autoscaling.x-k8s.io/consume-provisioning-request"
	ProvisioningClassPodAnnotationKey   = "autoscaling.x-k8s.io/provisioning-class-name"
)
GO
}

# The CRDs, copied from the projects' modules.
crds() {
    local out=$1 ocp capi cao
    rm -rf "$out"
    mkdir -p "$out"
    ocp=$(module_dir github.com/openshift/api)
    capi=$(module_dir sigs.k8s.io/cluster-api)
    cao=$(module_dir github.com/openshift/cluster-autoscaler-operator)
    [ -n "$ocp" ] && [ -n "$capi" ] && [ -n "$cao" ] || die "could not download the CRD modules"
    local m=$ocp/machine/v1beta1/zz_generated.crd-manifests
    cp "$m/0000_10_machine-api_01_machinesets-Default.crd.yaml" "$out/ocp-machinesets.yaml"
    cp "$m/0000_10_machine-api_01_machines-Default.crd.yaml" "$out/ocp-machines.yaml"
    # The cluster-wide configuration OpenShift's MachineSet controller reads at start.
    local c=$ocp/config/v1/zz_generated.crd-manifests
    cp "$c/0000_10_config-operator_01_infrastructures-Default.crd.yaml" "$out/ocp-infrastructures.yaml"
    cp "$c/0000_10_config-operator_01_dnses.crd.yaml" "$out/ocp-dnses.yaml"
    # Every kind of Cluster API's core: its manager watches them all.
    local f
    for f in "$capi"/core/config/crd/bases/*.yaml; do
        cp "$f" "$out/capi-$(basename "$f")"
    done
    cp "$cao/install/01_clusterautoscaler.crd.yaml" "$out/clusterautoscalers.yaml"
    cp "$cao/install/02_machineautoscaler.crd.yaml" "$out/machineautoscalers.yaml"
    provisioning_requests_crd "$out/provisioningrequests.yaml"
    chmod -R u+w "$out"
}

# The ProvisioningRequest CRD of the autoscaler's apis module. The version the proxy serves
# (see upstream_apis) defines only v1beta1; upstream's current manifest serves the same
# schema as v1 (stored) and v1beta1: so its one version block twice, as those two.
provisioning_requests_crd() {
    local src
    src=$(module_dir k8s.io/autoscaler/cluster-autoscaler/apis)
    [ -n "$src" ] || die "could not download k8s.io/autoscaler/cluster-autoscaler/apis"
    awk '
        /^  versions:$/ { print; body = 1; next }
        !body { print; next }
        { block = block $0 "\n" }
        END {
            v1 = block; sub(/\n    name: v1beta1\n/, "\n    name: v1\n", v1)
            old = block; sub(/\n    storage: true\n/, "\n    storage: false\n", old)
            printf "%s%s", v1, old
        }' "$src/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml" >"$1"
    grep -q '^    name: v1$' "$1" || die "unexpected ProvisioningRequest CRD in $src"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# --- certificates -------------------------------------------------------------------------

certs() {
    local pki=$1
    mkdir -p "$pki"
    (
        cd "$pki"
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=fleetscaler-testbed-ca" \
            -keyout ca.key -out ca.crt 2>/dev/null
        leaf apiserver "/CN=kube-apiserver" \
            "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
        leaf admin "/O=system:masters/CN=kubernetes-admin" ""
        # Cluster API's webhooks, served on loopback.
        leaf webhook "/CN=cluster-api-webhooks" "subjectAltName=IP:127.0.0.1"
        openssl genrsa -out sa.key 2048 2>/dev/null
        openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    )
}

leaf() {
    local name=$1 subject=$2 san=$3
    openssl req -newkey rsa:2048 -nodes -subj "$subject" -keyout "$name.key" -out "$name.csr" 2>/dev/null
    local ext
    ext=$(mktemp)
    {
        echo "basicConstraints=CA:FALSE"
        echo "keyUsage=digitalSignature,keyEncipherment"
        if [ -n "$san" ]; then
            echo "extendedKeyUsage=serverAuth"
            echo "$san"
        else
            echo "extendedKeyUsage=clientAuth"
        fi
    } >"$ext"
    openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
        -extfile "$ext" -out "$name.crt" 2>/dev/null
    rm -f "$ext" "$name.csr"
}

b64() { base64 -w0 <"$1"; }

kubeconfig() {
    local dir=$1 name=$2 port=$3
    cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $name
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority-data: $(b64 "$dir/pki/ca.crt")
users:
- name: $name-admin
  user:
    client-certificate-data: $(b64 "$dir/pki/admin.crt")
    client-key-data: $(b64 "$dir/pki/admin.key")
contexts:
- name: $name
  context:
    cluster: $name
    user: $name-admin
current-context: $name
EOF
    chmod 600 "$dir/kubeconfig"
}

# --- processes ----------------------------------------------------------------------------

# Starts a component in its own session (a signal to the test does not reach it) and
# records its pid. The command line is kept so `restart` can start it again.
start() {
    local dir=$1 name=$2
    shift 2
    printf '%q ' "$@" >"$dir/run/$name.cmd"
    setsid "$@" >>"$dir/logs/$name.log" 2>&1 </dev/null &
    echo $! >"$dir/run/$name.pid"
}

stop() {
    local dir=$1 name=$2 pid
    [ -f "$dir/run/$name.pid" ] || return 0
    pid=$(cat "$dir/run/$name.pid")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/run/$name.pid"
}

# Polls `check` until it succeeds (every 100 ms, at most `secs` seconds).
wait_for() {
    local what=$1 secs=$2 dir=$3
    shift 3
    local deadline=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        if [ $SECONDS -ge $deadline ]; then
            log "timed out after ${secs}s waiting for $what; last lines of the logs:"
            tail -n 5 "$dir"/logs/*.log >&2 || true
            return 1
        fi
        sleep 0.1
    done
}

etcd_ok() { curl -sf "http://127.0.0.1:$(cat "$1/run/etcd.port")/health" | grep -q '"health":"true"'; }

api_ready() {
    local dir=$1
    curl -sf --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" \
        "https://127.0.0.1:$(cat "$dir/run/apiserver.port")/readyz" | grep -q '^ok$'
}

start_etcd() {
    local dir=$1 bin=$2 client peer
    client=$(cat "$dir/run/etcd.port")
    peer=$(cat "$dir/run/etcd-peer.port")
    start "$dir" etcd "$bin/etcd" --name testbed --data-dir "$dir/etcd" \
        --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
        --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "testbed=http://127.0.0.1:$peer" --unsafe-no-fsync --log-level warn
}

start_apiserver() {
    local dir=$1 bin=$2 pki=$1/pki
    start "$dir" kube-apiserver "$bin/kube-apiserver" \
        --etcd-servers "http://127.0.0.1:$(cat "$dir/run/etcd.port")" \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
        --secure-port "$(cat "$dir/run/apiserver.port")" \
        --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
        --client-ca-file "$pki/ca.crt" \
        --service-account-issuer https://kubernetes.default.svc \
        --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
        --service-cluster-ip-range 10.0.0.0/24 --authorization-mode RBAC \
        --profiling=false --event-ttl 1h \
        --audit-policy-file "$dir/audit-policy.yaml" --audit-log-path "$dir/logs/audit.log" \
        --audit-log-format json $(cat "$dir/run/apiserver.flags")
}

# Client rate limits of the controller-manager and the scheduler: their defaults (20 and 50
# requests a second) unless `up --large`, where tens of thousands of pods are to be made and
# bound in minutes rather than half an hour.
client_flags() {
    large_flag "$1" --kube-api-qps 1000 --kube-api-burst 2000
}

# The rest of the arguments, under `up --large` only. There the node lifecycle controller
# also waits 5 minutes, not 50 s, for a lease: kwok renews a thousand of them late while
# tens of thousands of pods are being made, and the nodes it would mark NotReady meanwhile
# leave their pods NotReady for good (kwok does not make them Ready again).
large_flag() {
    local dir=$1
    shift
    [ "$(cat "$dir/run/large" 2>/dev/null)" = 1 ] || return 0
    echo "$@"
}

# The audit log (DIR/logs/audit.log) says who wrote what, and what a service account was
# refused: every request of a service account, every other write but the heartbeats.
audit_policy() {
    cat >"$1" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}]
  namespaces: [kube-node-lease]
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
POLICY
}

start_controllers() {
    local dir=$1 bin=$2 kc=$1/kubeconfig pki=$1/pki
    # Controllers for clouds and the node IPAM have nothing to do here.
    start "$dir" kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$kc" \
        --secure-port 0 --leader-elect=false --profiling=false \
        --controllers '*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller' \
        --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
        --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
        $(client_flags "$dir") $(large_flag "$dir" --node-monitor-grace-period 5m)
    start "$dir" kube-scheduler "$bin/kube-scheduler" --kubeconfig "$kc" \
        --secure-port 0 --leader-elect=false --profiling=false $(client_flags "$dir")
    start "$dir" kwok "$bin/kwok" --kubeconfig "$kc" --config "$dir/kwok.yaml" \
        --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
        --node-lease-duration-seconds 40 --cidr 10.64.0.0/12 --server-address ""
}

# kwok's own stages, but a node marked never-ready stays NotReady.
kwok_config() {
    local out=$1 kwok stage
    kwok=$(module_dir sigs.k8s.io/kwok kwok)
    [ -n "$kwok" ] || die "could not download sigs.k8s.io/kwok"
    stage=$kwok/kustomize/stage
    {
        # The extra selector goes right under node-initialize's matchExpressions.
        awk '{print} /matchExpressions:/ && !done {
            print "    - key: '\''.metadata.annotations[\"sim.fleetscaler.io/never-ready\"]'\''"
            print "      operator: '\''DoesNotExist'\''"
            done=1 }' "$stage/node/fast/node-initialize.yaml"
        for f in "$stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
            "$stage/pod/fast/pod-ready.yaml" "$stage/pod/fast/pod-complete.yaml" \
            "$stage/pod/fast/pod-delete.yaml"; do
            echo "---"
            cat "$f"
        done
    } >"$out"
}

fleetscaler_bin() {
    if [ -n "${FLEETSCALER_BIN:-}" ]; then
        echo "$FLEETSCALER_BIN"
        return
    fi
    (cd "$root" && cargo build -q --bin fleetscaler >&2)
    echo "$root/target/debug/fleetscaler"
}

kubectl_in() {
    local dir=$1
    shift
    "$(cat "$dir/run/bin")/kubectl" --kubeconfig "$dir/kubeconfig" "$@"
}

apply_crds() {
    local dir=$1 bin=$2 capi=$3 files=() f
    for f in "$bin"/crds.v3/*.yaml; do
        [ "$capi" = 1 ] || [[ $(basename "$f") != capi-* ]] || continue
        files+=(-f "$f")
    done
    [ "$capi" = 0 ] || files+=(-f "$testbed/cloud/crds.yaml")
    kubectl_in "$dir" apply --server-side "${files[@]}" >/dev/null
    # Cluster API is served and stored as v1beta2 only, as on a cluster whose conversion
    # webhook is absent: v1beta1 answers nothing rather than wrong shapes.
    local crd versions i patch
    for crd in $([ "$capi" = 0 ] || echo machinedeployments machinesets machines); do
        crd=$crd.cluster.x-k8s.io
        versions=$(kubectl_in "$dir" get crd "$crd" -o jsonpath='{.spec.versions[*].name}')
        i=0
        patch=""
        for v in $versions; do
            if [ "$v" != v1beta2 ]; then
                patch+="${patch:+,}{\"op\":\"replace\",\"path\":\"/spec/versions/$i/served\",\"value\":false}"
            fi
            i=$((i + 1))
        done
        [ -z "$patch" ] || kubectl_in "$dir" patch crd "$crd" --type json -p "[$patch]" >/dev/null
    done
    kubectl_in "$dir" wait --for condition=established --timeout 60s crd --all >/dev/null
    kubectl_in "$dir" create namespace openshift-machine-api >/dev/null
    kubectl_in "$dir" create namespace openshift-cluster-api >/dev/null
}

cmd_up() {
    local dir="" name=testbed delay=2s machines=1 capi=1 owner="" apiserver_flags="" large=0
    while [ $# -gt 0 ]; do
        case $1 in
        --name) name=$2; shift 2 ;;
        --provision-delay) delay=$2; shift 2 ;;
        --no-machines) machines=0; shift ;;
        # An OpenShift cluster as most are: no Cluster API (its CRDs, manager and Cluster).
        --no-cluster-api) capi=0; shift ;;
        # Watches served by etcd itself: a watch from a compacted revision is a 410 at once
        # (the watch cache would replay its state as ADDED events instead, until it has
        # dropped events of its own).
        --no-watch-cache) apiserver_flags+=" --watch-cache=false"; shift ;;
        # Upstream's scale (the versus-upstream bench's VERSUS_SCALE mode: 1,000 nodes, 30,000
        # pods): the controller-manager's and the scheduler's client rate limits raised, and
        # the controller-manager's node grace period (see large_flag).
        --large) large=1; shift ;;
        --owner) owner=$2; shift 2 ;;
        -*) die "unknown option $1" ;;
        *) [ -z "$dir" ] || die "one DIR only"; dir=$1; shift ;;
        esac
    done
    [ -n "$dir" ] || die "usage: real-cluster.sh up DIR [--name NAME]"
    local bin fleetscaler=""
    bin=$(cmd_build)
    [ $machines = 0 ] || fleetscaler=$(fleetscaler_bin)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ ! -d "$dir/run" ] || die "$dir already holds a control plane (down it first)"
    mkdir -p "$dir/run" "$dir/logs"
    echo "$bin" >"$dir/run/bin"
    echo "$apiserver_flags" >"$dir/run/apiserver.flags"
    echo "$large" >"$dir/run/large"
    local start_time=$SECONDS
    certs "$dir/pki"
    free_port >"$dir/run/etcd.port"
    free_port >"$dir/run/etcd-peer.port"
    free_port >"$dir/run/apiserver.port"
    kubeconfig "$dir" "$name" "$(cat "$dir/run/apiserver.port")"
    cp "$bin/kwok-stages.yaml" "$dir/kwok.yaml"
    audit_policy "$dir/audit-policy.yaml"
    start_etcd "$dir" "$bin"
    wait_for etcd 30 "$dir" etcd_ok "$dir" || { cmd_down "$dir"; die "etcd did not start"; }
    start_apiserver "$dir" "$bin"
    wait_for kube-apiserver 60 "$dir" api_ready "$dir" || { cmd_down "$dir"; die "kube-apiserver did not become ready"; }
    start_controllers "$dir" "$bin"
    apply_crds "$dir" "$bin" "$capi" || { cmd_down "$dir"; die "could not apply the CRDs"; }
    # The default ServiceAccount appears once the controller-manager works: pods can be made.
    wait_for "the controller-manager" 60 "$dir" kubectl_in "$dir" get serviceaccount default \
        || { cmd_down "$dir"; die "kube-controller-manager did not start"; }
    openshift_config "$dir" "$name" || { cmd_down "$dir"; die "could not write OpenShift's cluster configuration"; }
    start_openshift_controllers "$dir" "$bin"
    if [ $capi = 1 ]; then
        start_cluster_api "$dir" "$bin" || { cmd_down "$dir"; die "Cluster API's manager did not start"; }
        capi_cluster "$dir" "$name" || { cmd_down "$dir"; die "could not create the Cluster object"; }
    fi
    [ -z "$fleetscaler" ] || start_machines "$dir" "$fleetscaler" "$delay"
    [ -z "$owner" ] || watch_owner "$dir" "$owner"
    log "$name up in $((SECONDS - start_time)) s: KUBECONFIG=$dir/kubeconfig"
}

# Stops the control plane once `owner` is gone.
watch_owner() {
    local dir=$1 owner=$2
    setsid bash -c 'while kill -0 "$1" 2>/dev/null && [ -d "$2/run" ]; do sleep 1; done; exec "$0" down "$2"' \
        "$0" "$owner" "$dir" >/dev/null 2>&1 </dev/null &
}

components="machines cluster-api-manager nodelink-controller machineset-controller kwok kube-scheduler kube-controller-manager kube-apiserver etcd"

cmd_down() {
    local dir=${1:?usage: real-cluster.sh down DIR}
    [ -d "$dir/run" ] || return 0
    for c in $components; do
        stop "$dir" "$c"
    done
    rm -rf "$dir/run"
}

cmd_restart() {
    local dir=${1:?usage: real-cluster.sh restart DIR COMPONENT} name=${2:?component}
    [ -f "$dir/run/$name.cmd" ] || die "no component $name in $dir"
    stop "$dir" "$name"
    eval "setsid $(cat "$dir/run/$name.cmd") >>\"$dir/logs/$name.log\" 2>&1 </dev/null &"
    echo $! >"$dir/run/$name.pid"
    case $name in
    etcd) wait_for etcd 30 "$dir" etcd_ok "$dir" ;;
    kube-apiserver) wait_for kube-apiserver 60 "$dir" api_ready "$dir" ;;
    esac
}

cmd_compact() {
    local dir=${1:?usage: real-cluster.sh compact DIR} url rev
    url="http://127.0.0.1:$(cat "$dir/run/etcd.port")/v3/kv"
    rev=$(curl -sf "$url/range" -d '{"key":"AA=="}' | sed -n 's/.*"revision":"\([0-9]*\)".*/\1/p')
    [ -n "$rev" ] || die "could not read etcd's revision"
    curl -sf "$url/compaction" -d "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null
    echo "$rev"
}

case ${1:-} in
build) shift; cmd_build "$@" ;;
up) shift; cmd_up "$@" ;;
down) shift; cmd_down "$@" ;;
restart) shift; cmd_restart "$@" ;;
compact) shift; cmd_compact "$@" ;;
*) die "usage: real-cluster.sh build | up DIR [--name NAME] | down DIR | restart DIR COMPONENT | compact DIR" ;;
esac
