#!/usr/bin/env bash
# The fleetscaler image built and run on this machine, with no registry at all: FROM scratch
# (Containerfile.local), holding the release binary, the shared libraries it links and the
# dynamic loader, /etc/passwd and /etc/group with user 65532, and Debian's CA bundle. The
# Containerfile (distroless) stays the way to build it where registries are reachable;
# docs/install.md compares the two. tests/real/image.rs drives this script.
#
#   scripts/image.sh binary                 cargo build --release --locked --bin fleetscaler
#   scripts/image.sh build [--tag T] [--binary FILE]
#                                           the binary (unless given), then the image; prints
#                                           its tag (default fleetscaler:<Cargo.toml version>)
#   scripts/image.sh run-check [--tag T] FILE [ARG...]
#                                           `fleetscaler check-config --offline` on FILE in a
#                                           container; exits with its status
#   scripts/image.sh run-hub [--tag T] --name NAME --listen ADDR FILE
#                                           `fleetscaler run` on FILE, detached, on the host's
#                                           network, listening on ADDR
#   scripts/image.sh stop NAME              SIGTERM, wait for the exit, print its status
#   scripts/image.sh logs NAME              the container's output
#   scripts/image.sh state NAME             running, exited, ... (nothing if there is none)
#   scripts/image.sh pid NAME               its main process's PID on this host
#   scripts/image.sh inspect [--tag T]      `size BYTES`, `user USER`, `entrypoint JSON`
#   scripts/image.sh files [--tag T]        every path of the image (`tar -tv`)
#   scripts/image.sh clean [--tag T] [--name NAME]...
#                                           remove those containers and that image
#   scripts/image.sh engine                 the engine and the flags used on this machine
#
# FILE is mounted read-only with its directory at /etc/fleetscaler, so that the kubeconfigs
# beside it are /etc/fleetscaler/<name> in the container. The containers run as the chart's
# pod does: read-only root file system, every capability dropped, no privilege escalation.
#
# The engine is podman (Debian: apt-get install podman runc), else docker with a daemon that
# answers; FLEETSCALER_IMAGE_ENGINE=podman|docker chooses. With podman, the OCI runtime is
# runc when installed (FLEETSCALER_OCI_RUNTIME overrides): Debian 12's crun 1.8 refuses a
# "hybrid" cgroup layout (cgroup v1 controllers beside a v2 hierarchy that has controllers
# of its own), which CI's machines have. Every container gets explicit ulimits within this
# shell's: podman's defaults (nofile 1048576) need CAP_SYS_RESOURCE, which a sandboxed
# root may lack.
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
    echo "image.sh: $*" >&2
    exit 1
}

target=${CARGO_TARGET_DIR:-target}
cargo=${CARGO:-cargo}

version() {
    local v
    v=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
    [ -n "$v" ] || die "no version = \"...\" line in Cargo.toml"
    echo "$v"
}

engine_cmd=()
engine_name=""
engine() {
    [ -n "$engine_name" ] && return
    local want=${FLEETSCALER_IMAGE_ENGINE:-}
    if [ -z "$want" ]; then
        if command -v podman >/dev/null; then
            want=podman
        elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
            want=docker
        else
            die "no container engine: podman is not installed (Debian: apt-get install podman runc; scripts/test.sh installs them under CI=true), and docker is absent or its daemon does not answer"
        fi
    fi
    case $want in
        podman)
            command -v podman >/dev/null ||
                die "FLEETSCALER_IMAGE_ENGINE=podman but podman is not installed (Debian: apt-get install podman runc)"
            engine_cmd=(podman)
            local runtime=${FLEETSCALER_OCI_RUNTIME:-}
            if [ -z "$runtime" ] && command -v runc >/dev/null; then
                runtime=runc
            fi
            [ -z "$runtime" ] || engine_cmd+=(--runtime "$runtime")
            ;;
        docker)
            command -v docker >/dev/null ||
                die "FLEETSCALER_IMAGE_ENGINE=docker but docker is not installed"
            docker info >/dev/null 2>&1 || die "docker's daemon does not answer (docker info)"
            engine_cmd=(docker)
            ;;
        *) die "FLEETSCALER_IMAGE_ENGINE=$want: podman or docker" ;;
    esac
    engine_name=$want
}

# Before running a container with podman: crun (podman's default) cannot on a hybrid cgroup
# layout, so say which package is missing rather than let crun fail.
runtime_ok() {
    [ "$engine_name" = podman ] || return 0
    case " ${engine_cmd[*]} " in *" --runtime "*) return 0 ;; esac
    local unified=/sys/fs/cgroup/unified/cgroup.controllers
    if [ -n "$(cat "$unified" 2>/dev/null)" ]; then
        die "runc is missing: this machine's cgroups are hybrid (v1 controllers, and a v2 hierarchy with controllers: $(cat "$unified")), which crun refuses (Debian: apt-get install runc)"
    fi
}

run_flags() {
    local nofile
    nofile=$(ulimit -Hn)
    if [ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ]; then
        nofile=65536
    fi
    # nproc counts the threads of user 65532: the hub needs a few dozen.
    echo --ulimit "nofile=$nofile:$nofile" --ulimit nproc=4096:4096 \
        --read-only --cap-drop ALL --security-opt no-new-privileges
}

binary() {
    command -v "$cargo" >/dev/null || die "cargo is not on PATH"
    echo "image.sh: cargo build --release --locked --bin fleetscaler" >&2
    # Run from a test (tests/real/image.rs), cargo test's variables for the test's package would
    # be inherited, and ring's build script reruns when they change (it asks to): the whole
    # release build again. Without them this is a no-op after scripts/test.sh's build.
    (
        for v in $(compgen -e); do
            case $v in
                CARGO_PKG_* | CARGO_MANIFEST_* | CARGO_CRATE_NAME | CARGO_BIN_NAME | \
                    CARGO_PRIMARY_PACKAGE | CARGO_TARGET_TMPDIR | OUT_DIR) unset "$v" ;;
            esac
        done
        exec "$cargo" build --release --locked --bin fleetscaler
    ) >&2
}

# The build context: rootfs/ with the binary, what it links, users and CA certificates.
stage() {
    local bin=$1 ctx=$2 root=$2/rootfs
    command -v strip >/dev/null || die "strip is missing (Debian: apt-get install binutils)"
    command -v ldd >/dev/null || die "ldd is missing (Debian: apt-get install libc-bin)"
    local ca=/etc/ssl/certs/ca-certificates.crt
    [ -s "$ca" ] || die "$ca is missing (Debian: apt-get install ca-certificates)"
    mkdir -p "$root/etc/ssl/certs"
    # Debug info (line tables) is most of the release binary; the symbols stay, so a
    # backtrace still names its functions.
    strip --strip-debug -o "$root/fleetscaler" "$bin"
    chmod 0755 "$root/fleetscaler"
    # Every absolute path ldd names: the libraries and the loader, each at that path. A
    # static binary has none (ldd then exits non-zero).
    local libs lib
    libs=$(ldd "$bin" 2>/dev/null | grep -o '/[^ ]*' || true)
    if [ -z "$libs" ] && ! ldd "$bin" 2>&1 | grep -q 'not a dynamic executable'; then
        die "ldd $bin named no library: $(ldd "$bin" 2>&1 | head -n 3)"
    fi
    for lib in $libs; do
        [ -e "$lib" ] || die "ldd names $lib, which does not exist"
        mkdir -p "$root$(dirname "$lib")"
        cp -L "$lib" "$root$lib"
    done
    cp "$ca" "$root/etc/ssl/certs/ca-certificates.crt"
    printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' \
        'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin' >"$root/etc/passwd"
    printf '%s\n' 'root:x:0:' 'nonroot:x:65532:' >"$root/etc/group"
    chmod 0644 "$root/etc/passwd" "$root/etc/group" "$root/etc/ssl/certs/ca-certificates.crt"
}

build() {
    local tag="" bin=""
    while [ $# -gt 0 ]; do
        case $1 in
            --tag) tag=${2:?--tag needs a value}; shift 2 ;;
            --binary) bin=${2:?--binary needs a file}; shift 2 ;;
            *) die "build: unknown argument $1" ;;
        esac
    done
    tag=${tag:-fleetscaler:$(version)}
    engine
    if [ -z "$bin" ]; then
        binary
        bin=$target/release/fleetscaler
    fi
    [ -x "$bin" ] || die "no executable $bin"
    mkdir -p "$target/image"
    ctx=$(mktemp -d "$target/image/context.XXXXXX")
    trap 'rm -rf "$ctx"' EXIT
    stage "$bin" "$ctx"
    echo "image.sh: ${engine_cmd[*]} build -t $tag -f Containerfile.local $ctx" >&2
    "${engine_cmd[@]}" build -t "$tag" -f Containerfile.local \
        --label "org.opencontainers.image.version=$(version)" "$ctx" >&2
    echo "$tag"
}

# FILE as /etc/fleetscaler/<its name>, its directory mounted read-only.
mount_args() {
    local file=$1
    [ -f "$file" ] || die "no file $file"
    local dir
    dir=$(cd "$(dirname "$file")" && pwd)
    echo -v "$dir:/etc/fleetscaler:ro"
}

run_check() {
    local tag=""
    if [ "${1:-}" = --tag ]; then tag=${2:?--tag needs a value}; shift 2; fi
    [ $# -ge 1 ] || die "run-check [--tag T] FILE [ARG...]"
    local file=$1
    shift
    tag=${tag:-fleetscaler:$(version)}
    engine
    runtime_ok
    local status=0
    # shellcheck disable=SC2046 # the flags are words without spaces
    "${engine_cmd[@]}" run --rm --network none $(run_flags) $(mount_args "$file") "$tag" \
        check-config --offline -c "/etc/fleetscaler/$(basename "$file")" "$@" || status=$?
    exit "$status"
}

run_hub() {
    local tag="" name="" listen=""
    while [ $# -gt 1 ]; do
        case $1 in
            --tag) tag=${2:?}; shift 2 ;;
            --name) name=${2:?}; shift 2 ;;
            --listen) listen=${2:?}; shift 2 ;;
            *) break ;;
        esac
    done
    if [ $# -ne 1 ] || [ -z "$name" ] || [ -z "$listen" ]; then
        die "run-hub [--tag T] --name NAME --listen ADDR FILE"
    fi
    local file=$1
    tag=${tag:-fleetscaler:$(version)}
    engine
    runtime_ok
    # The host's network: no bridge, no firewall rules, and ADDR is reached from here as
    # it is (in a pod, hub.listen stays 0.0.0.0:8080).
    # shellcheck disable=SC2046
    "${engine_cmd[@]}" run -d --name "$name" --network host $(run_flags) \
        $(mount_args "$file") "$tag" \
        run --config "/etc/fleetscaler/$(basename "$file")" --listen "$listen" >/dev/null
    echo "$name"
}

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

exists() {
    "${engine_cmd[@]}" container inspect "$1" >/dev/null 2>&1
}

main() {
    local cmd=${1:-}
    [ $# -eq 0 ] || shift
    case $cmd in
        binary) binary ;;
        build) build "$@" ;;
        run-check) run_check "$@" ;;
        run-hub) run_hub "$@" ;;
        stop)
            [ $# -eq 1 ] || die "stop NAME"
            engine
            exists "$1" || die "no container $1"
            "${engine_cmd[@]}" stop -t 20 "$1" >/dev/null
            "${engine_cmd[@]}" container inspect --format '{{.State.ExitCode}}' "$1"
            ;;
        logs)
            [ $# -eq 1 ] || die "logs NAME"
            engine
            "${engine_cmd[@]}" logs "$1" 2>&1
            ;;
        state)
            [ $# -eq 1 ] || die "state NAME"
            engine
            if exists "$1"; then
                "${engine_cmd[@]}" container inspect --format '{{.State.Status}}' "$1"
            fi
            ;;
        pid)
            [ $# -eq 1 ] || die "pid NAME"
            engine
            "${engine_cmd[@]}" container inspect --format '{{.State.Pid}}' "$1"
            ;;
        inspect)
            local tag=""
            if [ "${1:-}" = --tag ]; then tag=${2:?}; fi
            tag=${tag:-fleetscaler:$(version)}
            engine
            "${engine_cmd[@]}" image inspect --format \
                'size {{.Size}}{{"\n"}}user {{.Config.User}}{{"\n"}}entrypoint {{json .Config.Entrypoint}}{{"\n"}}' "$tag"
            ;;
        files)
            local tag=""
            if [ "${1:-}" = --tag ]; then tag=${2:?}; fi
            tag=${tag:-fleetscaler:$(version)}
            engine
            # A container that never starts, exported: the image's file system alone.
            local c
            c=$("${engine_cmd[@]}" create "$tag")
            local status=0
            "${engine_cmd[@]}" export "$c" | tar -tvf - || status=$?
            "${engine_cmd[@]}" rm "$c" >/dev/null
            return "$status"
            ;;
        clean)
            local tag="" names=()
            while [ $# -gt 0 ]; do
                case $1 in
                    --tag) tag=${2:?}; shift 2 ;;
                    --name) names+=("${2:?}"); shift 2 ;;
                    *) die "clean: unknown argument $1" ;;
                esac
            done
            engine
            local n
            for n in "${names[@]}"; do
                if exists "$n"; then
                    "${engine_cmd[@]}" rm -f "$n" >/dev/null
                fi
            done
            if [ -n "$tag" ] && "${engine_cmd[@]}" image inspect "$tag" >/dev/null 2>&1; then
                "${engine_cmd[@]}" rmi "$tag" >/dev/null
            fi
            ;;
        engine)
            engine
            echo "${engine_cmd[*]} (run: $(run_flags))"
            ;;
        help | -h | --help) usage ;;
        *)
            usage >&2
            die "${cmd:+unknown command $cmd; }expected a command (above)"
            ;;
    esac
}

main "$@"
