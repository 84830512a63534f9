#!/usr/bin/env bash
# The two environments bench_encoder_backends.py runs sentence-transformers' ONNX and OpenVINO backends in.
# optimum's ONNX exporter needs transformers < 4.58, which sentence-transformers 6 does not accept: ONNX runs under
# sentence-transformers 5 and transformers 4.57. torch is pinned first to its CPU build (an unpinned one pulls CUDA).
set -euo pipefail
cd "$(dirname "$0")/.."
for name in st-onnx st-openvino; do
    python3 -m venv ".cache/$name"
    ".cache/$name/bin/pip" install -q --upgrade pip
    ".cache/$name/bin/pip" install -q torch==2.13.0
done
.cache/st-onnx/bin/pip install -q "sentence-transformers[onnx]<6" "transformers==4.57.*" torch==2.13.0
.cache/st-openvino/bin/pip install -q "sentence-transformers[openvino]==6.2.0" torch==2.13.0
# optimum-intel pulls a torchvision built for another torch, and transformers then fails to import; nothing here
# needs torchvision.
.cache/st-openvino/bin/pip uninstall -y -q torchvision
