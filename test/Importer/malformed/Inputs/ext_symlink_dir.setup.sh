# Generated from cases.json: builds what git cannot store.
set -e
mkdir -p "$T/realdir" && cp -f "$IN/ext_symlink_dir.onnx" "$T/" && cp -f "$IN/ext_data.bin" "$T/realdir/" && ln -sfn realdir "$T/linkdir"
