#!/usr/bin/env bash
# Build llama.cpp's llama-bench, llama-quantize (CPU only) for benchmarks/llama.py and
# llama-server for benchmarks/serve.py, from
# the llama.cpp source that the npm package node-llama-cpp ships (a git bundle), into
# benchmarks/.cache/llama.cpp (git-ignored). About 7 minutes on 2 cores.
set -euo pipefail
dir="$(cd "$(dirname "$0")" && pwd)/.cache/llama.cpp"
mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || npm init -y >/dev/null
NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --no-audit --no-fund node-llama-cpp@3.22.1
[ -d src ] || git clone -q node_modules/node-llama-cpp/llama/gitRelease.bundle src
# Native code, but without AMX (-march=native turns it on where the CPU lists amx_tile): on this
# project's Intel Xeon VMs (family 6 model 207) llama-bench died with SIGILL in ggml's AMX
# Q8_0 kernel (tilezero on an OpenMP worker) on the first prompt. LLAMA_CPP_AMX=1 keeps it.
amx=()
if [ "${LLAMA_CPP_AMX:-0}" != 1 ] && grep -qw amx_tile /proc/cpuinfo 2>/dev/null; then
  amx=(-DCMAKE_C_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
       -DCMAKE_CXX_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
fi
cmake -S src -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
  -DGGML_OPENMP=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
  "${amx[@]}"
cmake --build build --config Release -j"$(nproc)" --target llama-bench llama-quantize \
  llama-server
echo "built: $dir/build/bin/llama-bench"
