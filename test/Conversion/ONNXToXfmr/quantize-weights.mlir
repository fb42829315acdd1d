// RUN: xfmr-opt %s --xfmr-quantize-weights=group=32 --split-input-file --mlir-print-debuginfo=false | FileCheck %s
// RUN: not xfmr-opt %s --xfmr-quantize-weights=group=48 --split-input-file 2>&1 | FileCheck %s --check-prefix=GROUP

// A constant f32 [K, N] weight with K a multiple of the group becomes
// MatMulNBits: 4-bit blocks [N, K/32, 16], N * K/32 f32 scales and f32 zero
// points [N, K/32] (these uniform random blocks take the grid through 0:
// whole zero points 8 or 7), int8 activations (accuracy_level 4).
// CHECK-LABEL: func.func @quantized(
// CHECK-DAG: %[[B:.*]] = onnx.Constant() {value = dense_resource<xfmr_int4_weights{{[_0-9]*}}> : tensor<4x2x16xui8>}
// CHECK-DAG: %[[S:.*]] = onnx.Constant() {value = dense_resource<xfmr_int4_scales{{[_0-9]*}}> : tensor<8xf32>}
// CHECK-DAG: %[[Z:.*]] = onnx.Constant() {value = dense_resource<xfmr_int4_zeros{{[_0-9]*}}> : tensor<4x2xf32>}
// CHECK: onnx.ms.MatMulNBits(%arg0, %[[B]], %[[S]], %[[Z]], %{{.*}}, %{{.*}}) {K = 64 : i64, N = 4 : i64, accuracy_level = 4 : i64, block_size = 32 : i64}
// CHECK-NOT: onnx.MatMul(
// CHECK: xfmr_int4_zeros: "0x4000000000000041000000410000E040000000410000E040000000410000E04000000041"
// GROUP: xfmr-quantize-weights: group 48 is not 32, 64 or 128
func.func @quantized(%x: tensor<?x64xf32>) -> tensor<?x4xf32> {
  %w = onnx.Constant() {value = dense<"0xDD2406BF5839B43DB81E85BEF4FD543E1283803EC9765EBF105879BFCDCC2C3FA245F6BE9EEF07BF2DB27D3FFCA971BDBA492C3F128340BD04568E3EAAF132BF713D8A3E7F6A3C3F7F6A3C3DC74BF73EB29DAF3E643B5FBF9318043F355E3A3E9643CBBEC52070BFD1223B3FAE4761BD8941E03E4A0C423FD122DB3E508D573F3D0A57BEAC1C1A3FF853E3BDDBF95E3F4A0C423F7B144EBF355E3ABF60E510BF04566E3F6F1203BE3789813EA8C6CBBE4260653CD57869BE759398BE7B142E3E560E2D3E17D94E3F355EBA3EE3A55B3F2B87363F5A647B3FB29DAF3E448B2CBF7593383FF2D26D3FA01A4F3FDF4F0D3ED122DB3ECFF713BF5EBA293F2B87163EF628DCBEEE7C5FBF7D3F353F48E17A3F21B052BF23DB193FC74B37BE21B032BFAAF1D2BE5EBA093FDBF93E3FD57869BFFA7E6A3EC3F568BF77BEDF3E560EADBE6F12433F1904763F5839343C643B7F3F6F12C3BE759358BFCDCC4C3E3BDF6FBF48E11ABF7F6A3CBED34D623EC52030BF713D6ABF7F6A3C3FC976BEBE83C06A3F0C024B3F23DB79BEC1CAA1BD0AD7233DBC74933E8195433E46B6F33D8FC2753E3789613F4260653CDF4F0DBEC1CAE13E666606BFA8C6CBBE6ABC743F31082C3DF0A7C63DAC1C7ABF7B142EBE0AD7233E8FC275BF68916D3E022B873EAE4761BF5C8F823E4C3789BDD9CEB73E3D0A97BECFF7D33E46B6F33E6ABC74BF250661BF5839B43EDF4F6D3FDBF9FEBE0E2DB2BDA4703D3EEC51B8BE96438BBE0000C0BEDD2486BE8195433EBA49CCBE6DE77BBE1F850B3F0E2D72BF04560E3ED7A3F03E5C8FC2BE7B140EBFE3A51B3F54E305BF000020BFB81E05BE83C0CA3EA8C64BBFA245B6BEE7FBA9BE83C02A3F6DE7FBBD1904363F4C3729BF8B6CA7BE9A99993EB81E453F39B4C8BDCDCC0CBF4A0C42BFFCA9713D3F351EBF1B2F1D3FDF4F2D3F4A0C22BFE5D0E2BE1B2F1D3F7368913E91ED1C3F3F359EBE2DB23DBFF4FDD4BE2B87163FFA7EEABE1B2F9DBEE7FB29BE0AD723BE105839BEC74B573FC52030BF2DB27DBF6F12633F5C8F423F1058793FDD2406BE6666663F48E15A3F04560EBF5A64FB3EBA492C3F79E9A63EE3A51B3D6210D8BEE5D0A2BE1F850BBF1B2F5DBF7D3F353EAC1CDABE52B81E3FC3F568BF8D974E3FDD24C63E8716593F0C024B3F448B4C3F2DB21D3E105879BF5A64FB3E9EEF27BFCDCCCCBE79E9A63ECDCC4C3DC52030BE9CC4603F4260653ED34DA2BEA470FDBE8716393F7F6A3CBDD7A3103F508D97BE48E11ABFDF4F8D3DD34D223F273128BF7D3F153F6210583F08AC1C3FCBA1253FF6287CBF8195833E9A99393F666666BFE7FBE9BE560EEDBEAE47613D2DB21DBE1B2F5DBD68910D3FDBF97EBF0AD763BFDBF93EBF894140BF91ED5CBFAAF1723F0681353FCFF753BF6F12833B7F6ABCBEB6F3BDBE621098BE2B87963E"> : tensor<64x4xf32>} : () -> tensor<64x4xf32>
  %y = onnx.MatMul(%x, %w) : (tensor<?x64xf32>, tensor<64x4xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

// K not a multiple of the group (48 in blocks of 32): the last block is
// padded, as MatMulNBits stores it ([N, 2, 16] bytes, 2 scales per column);
// a weight known only at run time is left in f32.
// CHECK-LABEL: func.func @kept(
// CHECK-DAG: %[[B:.*]] = onnx.Constant() {value = dense_resource<xfmr_int4_weights{{[_0-9]*}}> : tensor<4x2x16xui8>}
// CHECK-DAG: %[[S:.*]] = onnx.Constant() {value = dense_resource<xfmr_int4_scales{{[_0-9]*}}> : tensor<8xf32>}
// CHECK: onnx.ms.MatMulNBits(%arg0, %[[B]], %[[S]], %{{.*}}) {K = 48 : i64, N = 4 : i64, accuracy_level = 4 : i64, block_size = 32 : i64}
// CHECK-NOT: MatMulNBits
// CHECK: onnx.MatMul(%arg1, %arg2)
func.func @kept(%x: tensor<?x48xf32>, %v: tensor<?x64xf32>, %wv: tensor<64x4xf32>) -> (tensor<?x4xf32>, tensor<?x4xf32>) {
  %w = onnx.Constant() {value = dense<"0xE926313E04568EBE3F351EBFA01AAFBE128340BFF853E33D1B2FDD3E8FC275BE3D0A57BFA69B24BF378981BE1904563ED7A3103F6ABC74BEAC1C1A3F6DE77B3EBA490CBE5C8F82BE6F1203BC3BDFCF3EE5D022BEF0A7C63E77BE9FBD5C8F02BFBC74933D14AEC73E5A645BBF9A9919BE508D17BED34D423FEE7C5F3F250681BEA8C64B3FF4FD143F46B6F3BEBC7493BD250641BF8941203F6666A63E6666463F8FC2153F1F85AB3EA01AEF3E6F12033E96434BBF5839343EA4707DBF2B8736BF448B0C3F4C3769BF60E550BF560E4DBFE5D0423F1D5A24BFCFF773BF17D92E3FC1CA41BFC520303FFCA9B13E31082C3F14AE673FC1CA213EFED4183FDF4F6DBFC3F5083F7F6ABC3CF628DC3ED57849BFDBF9FE3EC9765E3F9CC460BF5839B4BE6F12033E9EEF273F931804BF0AD723BF000000BF68916D3EC1CA013FAC1C5ABE14AE87BECFF753BE871699BE9EEF27BE7D3F55BF6F12833A0E2D723F0E2D32BEA470FD3EF2D22DBF8195C33E6F12033F0E2DB23E96430B3D022B07BD986E923E1F854B3FBC7433BF17D94EBFB6F3FD3E7D3F553F295C0F3DD578E9BD8941E03E9CC420BF7B14EEBEAC1C1ABFA01A2F3EA470BDBEC3F508BF8195C33E2731683F60E5D0BE986ED23E0E2D32BEF4FD343F560E2D3E8D97EEBED7A310BF583974BF9EEF27BDB29D6FBE9EEF27BF17D98EBEA245B6BEBA490C3F2B8736BF5A647B3F9EEF27BD83C04A3E6F1283BD96432B3FA69B243FD578E93D508D17BDC1CAE13E2B87363FA8C64BBEA01AEF3EA8C66B3FB81E85BDFA7E0ABF14AE07BF52B8DE3E46B6B33E83C06A3F7D3F353F931804BFDBF91EBFC74BF7BE894120BF7368D13E508D373FCDCC4C3F48E1FABE48E13A3FDBF9BEBE08AC1CBEFA7EEA3ECFF753BFD7A350BF0C022B3FF4FDD4BEAAF192BE2FDD243E46B6B33E7F6A7CBFC3F5A8BE6F1203BE4260E5BCE17A14BF7B142E3E4C37693F643B5FBEA245B63D6F1243BF6666E6BED578A93E666646BFDD24463F7368513F04564EBF4A0C623F250681BE1F850B3F0AD7033F7368D1BE5839B43E2DB29D3E08AC1C3FC520F0BE4A0C023F"> : tensor<48x4xf32>} : () -> tensor<48x4xf32>
  %y = onnx.MatMul(%x, %w) : (tensor<?x48xf32>, tensor<48x4xf32>) -> tensor<?x4xf32>
  %z = onnx.MatMul(%v, %wv) : (tensor<?x64xf32>, tensor<64x4xf32>) -> tensor<?x4xf32>
  return %y, %z : tensor<?x4xf32>, tensor<?x4xf32>
}

// -----

// Token embeddings: the table input_ids index becomes int8 rows with a
// scale each (max |row| / 127: row 0 [1, -2] -> scale 2/127, [64, -127]:
// bytes 40 81);
// a table the position ids index stays f32, as does a table tied to a
// MatMul (lm_head).
// CHECK-LABEL: func.func @embeddings(
// CHECK-DAG: %[[Q:.*]] = onnx.Constant() {value = dense_resource<xfmr_int8_embedding> : tensor<3x2xi8>}
// CHECK-DAG: %[[S:.*]] = onnx.Constant() {value = dense_resource<xfmr_int8_embedding_scales> : tensor<3xf32>}
// CHECK: xfmr.embedding %[[Q]], %arg0 scales(%[[S]] : tensor<3xf32>) : tensor<3x2xi8>, tensor<?xi64> -> tensor<?x2xf32>
// CHECK: onnx.Gather(%{{.*}}, %arg1)
// CHECK: onnx.Gather(%{{.*}}, %arg0)
// CHECK: xfmr_int8_embedding: "0x4000000040817F407F2A"
func.func @embeddings(%ids: tensor<?xi64> {onnx.name = "input_ids"}, %pos: tensor<?xi64> {onnx.name = "position_ids"}, %h: tensor<?x2xf32>) -> (tensor<?x2xf32>, tensor<?x2xf32>, tensor<?x2xf32>, tensor<?x3xf32>) {
  %t = onnx.Constant() {value = dense<[[1.0, -2.0], [0.5, 0.25], [3.0, 1.0]]> : tensor<3x2xf32>} : () -> tensor<3x2xf32>
  %p = onnx.Constant() {value = dense<[[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]]> : tensor<3x2xf32>} : () -> tensor<3x2xf32>
  %tied = onnx.Constant() {value = dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>} : () -> tensor<3x2xf32>
  %e = onnx.Gather(%t, %ids) {axis = 0 : i64} : (tensor<3x2xf32>, tensor<?xi64>) -> tensor<?x2xf32>
  %q = onnx.Gather(%p, %pos) {axis = 0 : i64} : (tensor<3x2xf32>, tensor<?xi64>) -> tensor<?x2xf32>
  %f = onnx.Gather(%tied, %ids) {axis = 0 : i64} : (tensor<3x2xf32>, tensor<?xi64>) -> tensor<?x2xf32>
  %tt = onnx.Transpose(%tied) {perm = [1, 0]} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  %logits = onnx.MatMul(%h, %tt) : (tensor<?x2xf32>, tensor<2x3xf32>) -> tensor<?x3xf32>
  return %e, %q, %f, %logits : tensor<?x2xf32>, tensor<?x2xf32>, tensor<?x2xf32>, tensor<?x3xf32>
}

// -----

// A block already on a 4-bit grid of its extremes (GGUF Q4_1's: here
// 0.1 * q - 0.25, 0 not on it) comes back exactly: scale 0.1 (up to f32
// rounding), zero point 2.5 (the grid through 0 would take 2). A language model's output product (returned by
// a function taking input_ids: lm_head) becomes int8 per channel,
// weight-only (no int8_activations), whatever the group.
// CHECK-LABEL: func.func @q41_grid_and_lm_head(
// CHECK: onnx.ms.MatMulNBits
// CHECK: %[[W:.*]] = quant.scast %{{.*}} : tensor<32x2xi8> to tensor<32x2x!quant.uniform<i8<-127:127>:f32:1
// CHECK: xfmr.linear %{{.*}}, %[[W]] :
// CHECK-NOT: int8_activations
// CHECK: return
// CHECK: xfmr_int4_zeros: "0x4000000000002040"
func.func @q41_grid_and_lm_head(%ids: tensor<?xi64> {onnx.name = "input_ids"}, %x: tensor<?x32xf32>) -> tensor<?x2xf32> {
  %w = onnx.Constant() {value = dense<[[-0.25], [-0.15], [-0.05], [0.05], [0.15], [0.25], [0.35], [0.45], [0.55], [0.65], [0.75], [0.85], [0.95], [1.05], [1.15], [1.25], [-0.25], [-0.15], [-0.05], [0.05], [0.15], [0.25], [0.35], [0.45], [0.55], [0.65], [0.75], [0.85], [0.95], [1.05], [1.15], [1.25]]> : tensor<32x1xf32>} : () -> tensor<32x1xf32>
  %h = onnx.MatMul(%x, %w) : (tensor<?x32xf32>, tensor<32x1xf32>) -> tensor<?x1xf32>
  %hh = onnx.Mul(%x, %h) : (tensor<?x32xf32>, tensor<?x1xf32>) -> tensor<?x32xf32>
  %lm = onnx.Constant() {value = dense<[[1.0, 0.75], [0.5, -0.25], [1.0, 0.75], [0.5, -0.25], [1.0, 0.75], [0.5, -0.25], [1.0, 0.75], [0.5, -0.25], [1.0, 0.75], [0.5, -0.25], [1.0, 0.75], [0.5, -0.25], [1.0, 0.75], [0.5, -0.25], [1.0, 0.75], [0.5, -0.25], [1.0, 0.75], [0.5, -0.25], [1.0, 0.75], [0.5, -0.25], [1.0, 0.75], [0.5, -0.25], [1.0, 0.75], [0.5, -0.25], [1.0, 0.75], [0.5, -0.25], [1.0, 0.75], [0.5, -0.25], [1.0, 0.75], [0.5, -0.25], [1.0, 0.75], [0.5, -0.25]]> : tensor<32x2xf32>} : () -> tensor<32x2xf32>
  %y = onnx.MatMul(%hh, %lm) : (tensor<?x32xf32>, tensor<32x2xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}
