#!/usr/bin/env bash
# Download the wheels the device calls carry (the GPU image has torch but not these versions).
# Python 3.12, manylinux x86-64: the device image's python3. Run from the repository root; .whl/ is ignored.
set -eu
mkdir -p .whl
for p in trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 pydantic==2.14.4 pydantic_core==2.50.5 \
         annotated_types==0.8.0 typing_inspection==0.4.5 peft==0.21.2 transformers==5.24.0 tokenizers==0.23.3; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "$p"
done
ls .whl
