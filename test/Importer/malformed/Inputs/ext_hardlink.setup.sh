# Generated from cases.json: builds what git cannot store.
set -e
mkdir -p "$T" && cp -f "$IN/ext_hardlink.onnx" "$T/" && cp -f "$IN/ext_data.bin" "$T/ext_hard_other.bin" && ln -f "$T/ext_hard_other.bin" "$T/ext_hard.bin"
