# Sourced by the GPU scripts: builds ctrun-gpt against this Python's
# libtorch (-DCTRUN_TRAINER_CUDA=ON, no launcher) into $B unless $B has one.
# Needs SRC (the source tree) and B (the build directory); returns 1 with
# the build log's tail when the build fails.
if [ ! -x "$B/trainer/apps/ctrun-gpt" ]; then
  TD=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')/Torch
  cmake -S "$SRC" -B "$B" -G Ninja -DCTRUN_BUILD_LAUNCHER=OFF -DCTRUN_TRAINER_CUDA=ON -DTorch_DIR="$TD" \
    -DCMAKE_BUILD_TYPE=Release > "$B.configure.log" 2>&1 &&
    cmake --build "$B" --target ctrun-gpt > "$B.build.log" 2>&1 ||
    { echo "build failed: $B.configure.log, $B.build.log"; tail -20 "$B.build.log"; return 1; }
fi
