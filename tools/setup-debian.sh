#!/usr/bin/env bash
# Installs what mlsim needs on Debian 12 (as root), skipping packages already present.
set -euo pipefail
packages=(
  cmake ninja-build g++ clang clang-format pkg-config make
  libsimgrid-dev libns3-dev ns3 libgsl-dev libsqlite3-dev libxml2-dev libpython3.11-dev
  libboost-dev libfmt-dev nlohmann-json3-dev libcli11-dev libabsl-dev libeigen3-dev
  libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-matplotlib parallel time
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
