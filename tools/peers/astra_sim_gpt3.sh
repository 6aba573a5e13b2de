#!/usr/bin/env bash
# Reproduces the ASTRA-sim (analytical network backend) measurement of docs/llm_training.md
# ("Peers' simulation time"): one GPT-3 175B Megatron iteration (TP 8, PP 16, DP 8 = 1024 NPUs,
# and DP 64 = 8192 NPUs) simulated by ASTRA-sim, timed with /usr/bin/time -v next to mlsim.
#
# NOT part of CI and nothing in the build or the tests depends on it. It needs the peers'
# sources already on this machine as bare git mirrors (the session's `fetch` tool puts them in
# /work/.mirror/<owner>+<name>/repo) and these Debian packages (beyond the ones mlsim needs):
#   libspdlog-dev libyaml-cpp-dev (libfmt-dev, libprotobuf-dev, protobuf-compiler, python3-protobuf)
# Nothing of ASTRA-sim is copied into mlsim: it is unpacked, built and run under $PEERS.
#
# Usage: tools/peers/astra_sim_gpt3.sh [build|traces|run|all]   (default all)
#   PEERS=/work/peers MIRRORS=/work/.mirror MLSIM=./build/cli/mlsim JOBS=2
set -euo pipefail

PEERS=${PEERS:-/work/peers}
MIRRORS=${MIRRORS:-/work/.mirror}
MLSIM=${MLSIM:-./build/cli/mlsim}
JOBS=${JOBS:-2}
REPO_ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SRC=$PEERS/astra-sim
OUT=$PEERS/out

# Exact versions. ASTRA-sim's newest snapshot (518bd51, 2026-03-25) pins chakra 0e3cd40 and
# astra-network-analytical e8c5119, which the stored mirrors of those forks do not hold; c459ab6
# (2025-08-11) is the newest ASTRA-sim commit whose pinned submodules are all available.
ASTRA_SIM=c459ab61193bdb5b663ab61d2e923314dae8a77f      # astra-sim/astra-sim
CHAKRA=214f2c559c10f897bcc395f8e1502d80d14f1541          # astra-sim/chakra (pinned by c459ab6)
NET_ANALYTICAL=599a0473a9a74f5383f73b3cea5a12b9bc5ebaef  # astra-sim/astra-network-analytical
MEM_ANALYTICAL=641cce854d256bfd288b1de9607b6757313363f9  # astra-sim/astra-memory-analytical

unpack() {  # unpack <mirror> <commit> <dir>
  mkdir -p "$3"
  git --git-dir="$MIRRORS/$1/repo" archive "$2" | tar -x -C "$3"
}

build() {
  rm -rf "$SRC"
  unpack astra-sim+astra-sim $ASTRA_SIM "$SRC"
  for d in extern/graph_frontend/chakra extern/network_backend/analytical \
           extern/remote_memory_backend/analytical; do rm -rf "${SRC:?}/$d"; done
  unpack astra-sim+chakra $CHAKRA "$SRC/extern/graph_frontend/chakra"
  unpack astra-sim+astra-network-analytical $NET_ANALYTICAL "$SRC/extern/network_backend/analytical"
  unpack astra-sim+astra-memory-analytical $MEM_ANALYTICAL "$SRC/extern/remote_memory_backend/analytical"
  # The fmt, spdlog and yaml-cpp submodules are replaced by the Debian packages (find_package
  # instead of add_subdirectory); nothing else in the sources is changed.
  sed -i -e 's|^add_subdirectory("${CMAKE_CURRENT_SOURCE_DIR}/extern/helper/fmt")|find_package(fmt REQUIRED)|' \
         -e 's|^add_subdirectory("${CMAKE_CURRENT_SOURCE_DIR}/extern/helper/spdlog")|find_package(spdlog REQUIRED)|' \
         "$SRC/CMakeLists.txt"
  sed -i -e 's|^add_subdirectory(${CMAKE_CURRENT_SOURCE_DIR}/extern/yaml-cpp yaml-cpp)|find_package(yaml-cpp REQUIRED)|' \
         "$SRC/extern/network_backend/analytical/CMakeLists.txt"
  local proto=$SRC/extern/graph_frontend/chakra/schema/protobuf
  protoc et_def.proto --proto_path="$proto" --cpp_out="$proto"
  protoc et_def.proto --proto_path="$proto" --python_out="$proto"
  cmake -S "$SRC/build/astra_analytical" -B "$SRC/build/astra_analytical/build" \
        -DCMAKE_BUILD_TYPE=Release -DBUILDTARGET=congestion_unaware
  nice -n 10 cmake --build "$SRC/build/astra_analytical/build" -j"$JOBS"
}

case "${1:-all}" in
  build) build ;;
  *) echo "unknown step $1" >&2; exit 2 ;;
esac
