# Generated from cases.json: builds what git cannot store.
set -e
mkdir -p "$T" && cp -f "$IN/ext_symlink_file.onnx" "$IN/ext_data.bin" "$T/" && ln -sfn ext_data.bin "$T/ext_link.bin"
