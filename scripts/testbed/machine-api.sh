# The Machine API controllers of the test bed (sourced by scripts/real-cluster.sh): the real
# ones production runs, and the project's machine controller playing only the cloud.

# OpenShift's own MachineSet controller (it creates and deletes the Machines, choosing which
# as production does) and nodelink (Machine <-> Node links). Their admission webhooks stay
# off: they validate a cloud's providerSpec, and the cloud here is the project's.
start_openshift_controllers() {
    local dir=$1 bin=$2 kc=$1/kubeconfig
    start "$dir" machineset-controller env KUBECONFIG="$kc" "$bin/machineset-controller" \
        --namespace openshift-machine-api --webhook-enabled=false --leader-elect=false \
        --metrics-bind-address 0 --health-addr 0
    start "$dir" nodelink-controller env KUBECONFIG="$kc" "$bin/nodelink-controller" \
        --namespace openshift-machine-api --leader-elect=false
}

# What OpenShift's controllers read of the cluster: its Infrastructure (platform None: no
# cloud of theirs to default a providerSpec for) and DNS.
openshift_config() {
    local dir=$1 name=$2 url
    url=https://127.0.0.1:$(cat "$dir/run/apiserver.port")
    kubectl_in "$dir" apply --server-side -f - >/dev/null <<EOF
apiVersion: config.openshift.io/v1
kind: Infrastructure
metadata: {name: cluster}
spec: {platformSpec: {type: None}}
---
apiVersion: config.openshift.io/v1
kind: DNS
metadata: {name: cluster}
spec: {baseDomain: $name.testbed.local}
EOF
    kubectl_in "$dir" patch infrastructure cluster --subresource status --type merge -p "$(cat <<EOF
{"status": {"infrastructureName": "$name", "platform": "None", "platformStatus": {"type": "None"},
 "controlPlaneTopology": "HighlyAvailable", "infrastructureTopology": "HighlyAvailable",
 "apiServerURL": "$url", "apiServerInternalURI": "$url", "etcdDiscoveryDomain": ""}}
EOF
)" >/dev/null
}

# Cluster API's core manager: the MachineDeployment, MachineSet, Machine and Cluster
# controllers, and its admission webhooks (defaulting and validation, as production serves
# them), reached by the apiserver at 127.0.0.1 with the test bed's CA. Returns once the
# webhooks answer and are registered.
start_cluster_api() {
    local dir=$1 bin=$2 port
    port=$(free_port)
    echo "$port" >"$dir/run/capi-webhook.port"
    start "$dir" cluster-api-manager env KUBECONFIG="$dir/kubeconfig" "$bin/cluster-api-manager" \
        --leader-elect=false --webhook-port "$port" --webhook-cert-dir "$dir/pki" \
        --webhook-cert-name webhook.crt --webhook-key-name webhook.key \
        --health-addr 0 --diagnostics-address 0
    wait_for "Cluster API's webhooks" 60 "$dir" webhook_answers "$dir" "$port" || return 1
    local ca
    ca=$(b64 "$dir/pki/ca.crt")
    # The manifests name a Service in the manager's namespace; here the manager is a
    # process on loopback.
    perl -0pe 's{clientConfig:\n(\s+)service:\n\s+name: webhook-service\n\s+namespace: system\n\s+path: (\S+)}{clientConfig:\n$1url: https://127.0.0.1:'"$port"'$2\n$1caBundle: '"$ca"'}g;
        s{name: (mutating|validating)-webhook-configuration}{name: cluster-api-$1}g' \
        "$bin/capi-webhooks.yaml" >"$dir/capi-webhooks.yaml"
    ! grep -q 'webhook-service' "$dir/capi-webhooks.yaml" || die "Cluster API's webhook manifests changed shape"
    kubectl_in "$dir" apply --server-side -f "$dir/capi-webhooks.yaml" >/dev/null
}

webhook_answers() {
    local code
    code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$1/pki/ca.crt" "https://127.0.0.1:$2/")
    [ "$code" != 000 ]
}

# The workload cluster Cluster API reconciles machines of: the test bed itself. Its
# control plane is a TestbedControlPlane (the project's kind) that `up` writes as
# initialised, since the apiserver runs already, and as externally managed (as EKS's or
# AKS's: no control-plane Machines, so Cluster API still drains and deletes the Nodes of
# deleted Machines); the kubeconfig Secret, which a control plane provider writes, points
# at the test bed.
capi_cluster() {
    local dir=$1 name=$2 ns=openshift-cluster-api port version=${k8s_version}
    port=$(cat "$dir/run/apiserver.port")
    kubectl_in "$dir" apply --server-side -f - >/dev/null <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: $name-kubeconfig
  namespace: $ns
  labels: {cluster.x-k8s.io/cluster-name: $name}
type: cluster.x-k8s.io/secret
data:
  value: $(b64 "$dir/kubeconfig")
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: TestbedControlPlane
metadata: {name: $name, namespace: $ns}
spec:
  version: $version
  controlPlaneEndpoint: {host: 127.0.0.1, port: $port}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: $name, namespace: $ns}
spec:
  controlPlaneRef: {apiGroup: controlplane.cluster.x-k8s.io, kind: TestbedControlPlane, name: $name}
EOF
    kubectl_in "$dir" -n "$ns" patch testbedcontrolplane "$name" --subresource status --type merge \
        -p "{\"status\": {\"initialization\": {\"controlPlaneInitialized\": true}, \"version\": \"$version\",
             \"externalManagedControlPlane\": true,
             \"replicas\": 3, \"readyReplicas\": 3, \"availableReplicas\": 3, \"upToDateReplicas\": 3}}" >/dev/null
}

# The test-bed machine controller: only the cloud, beside both APIs' real controllers (for
# Cluster API, the infrastructure provider of AWSMachines).
start_machines() {
    local dir=$1 fleetscaler=$2 delay=$3
    start "$dir" machines "$fleetscaler" sim machines --kubeconfig "$dir/kubeconfig" \
        --provision-delay "$delay" --real-controllers openshift,cluster-api
}
