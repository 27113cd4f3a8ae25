#!/usr/bin/env bash
# Installs everything ctrun needs to build, test and run its demo on Debian 12.
# Idempotent: re-running it installs nothing new. Needs root (or sudo).
set -euo pipefail

pkgs=(
  # build
  cmake ninja-build g++ pkg-config git
  # compiles cached across builds and clones (CMakeLists.txt: CTRUN_CCACHE)
  ccache
  # a faster linker (CMakeLists.txt: CTRUN_FAST_LINKER; gold, in binutils, otherwise)
  lld
  libboost1.74-dev libboost-filesystem1.74-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libspdlog-dev libcli11-dev catch2 nlohmann-json3-dev
  # trainer (libtorch, CPU + Gloo) and real PyTorch workers for the tests
  libtorch-dev libgloo-dev python3-torch python3-numpy zlib1g-dev
  # the demo's data set
  dataset-fashion-mnist
  # packaging: cpack -G DEB computes Depends with dpkg-shlibdeps (finding ELF files with file, readelf)
  dpkg-dev file binutils
  # tests: process inspection, PID namespaces
  procps util-linux iproute2 iptables
  # --numa-binding: the topology (hwloc); tests: worker stacks (gdb)
  libhwloc-dev gdb
  # the pip wheel (scripts/packaging/wheel.sh) and its test venv
  python3-build python3-wheel python3-venv python3-pip
  # bench/plot.py: the charts of docs/benchmarks.md (and its test)
  python3-matplotlib
  # tests: a real HTTP client scrapes ctrund --metrics-port
  curl
  # tests: the live status page loaded in a real headless browser
  chromium
  # tests: a real Slurm (slurmctld + slurmd, munge) on this host
  slurmctld slurmd slurm-client munge
  # tests: a real etcd cluster for --rdzv-backend etcd-v3
  etcd-server etcd-client
  # tests: certificates for the rendezvous TLS tests; OpenSSL headers (PEM checks)
  openssl libssl-dev
  # the container image and its tests (scripts/container, test_container.py):
  # rootful podman with runc and netavark; mmdebstrap for the Debian base;
  # catatonit for the pause image of `podman kube play`'s pods and PyYAML to
  # read the Kubernetes manifests (test_kube.py, test_kube_manifests.py)
  podman runc netavark mmdebstrap catatonit python3-yaml
)

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi

# etcd's v3 API .proto files (--rdzv-backend etcd-v3, proto/CMakeLists.txt),
# unpacked from the Debian -dev package that ships them, without installing
# its ~140 Go dependencies.
etcd_proto_dir=/usr/local/share/ctrun/etcd-proto
if [ ! -f "$etcd_proto_dir/usr/share/gocode/src/go.etcd.io/etcd/etcdserver/etcdserverpb/rpc.proto" ]; then
  etcd_debs=(golang-etcd-server-dev)
  tmp=$(mktemp -d)
  chmod 755 "$tmp"
  if ! (cd "$tmp" && apt-get download -qq "${etcd_debs[@]}" 2>/dev/null); then
    $sudo apt-get update -qq
    (cd "$tmp" && apt-get download -qq "${etcd_debs[@]}")
  fi
  $sudo mkdir -p "$etcd_proto_dir"  # dpkg-deb -x makes only the last level
  for deb in "$tmp"/*.deb; do $sudo dpkg-deb -x "$deb" "$etcd_proto_dir"; done
  rm -rf "$tmp"
  echo "install-deps: etcd v3 .proto files unpacked under $etcd_proto_dir"
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages already installed"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
