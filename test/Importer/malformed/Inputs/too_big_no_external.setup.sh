# Generated from cases.json: builds what git cannot store.
set -e
mkdir -p "$T" && cp "$IN/too_big_no_external.prefix" "$T/too_big_no_external.onnx" && truncate -s 2147487859 "$T/too_big_no_external.onnx"
