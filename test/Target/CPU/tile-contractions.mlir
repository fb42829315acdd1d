// RUN: xfmr-opt %s --xfmr-tile-contractions | FileCheck %s --check-prefix=AVX2
// RUN: xfmr-opt %s --xfmr-tile-contractions=lanes=16 | FileCheck %s --check-prefix=AVX512
// RUN: not xfmr-opt %s --xfmr-tile-contractions=lanes=4 2>&1 | FileCheck %s --check-prefix=BAD

// A projection [1, T, 64] x [64, 32]. From 6 rows on (AVX2) the full
// 16-column panels take register-blocked kernels: blocks of 6 rows, each
// row's 16 columns in two 8-wide accumulators, one multiply-add per k
// (contract, in increasing k: the loop's own arithmetic); the M mod 6 rows
// left take one block of that many rows. With lanes=16 (AVX-512) the
// blocks are 12 rows by two panels (32 columns) in 24 16-wide accumulators:
// two loads of B and twelve broadcasts per 24 multiply-adds.
#a = affine_map<(b, k, m, n) -> (b, m, k)>
#w = affine_map<(b, k, m, n) -> (k, n)>
#c = affine_map<(b, k, m, n) -> (b, m, n)>
// AVX2-LABEL: func.func @projection
//   AVX2-DAG:   %[[C6:.*]] = arith.constant 6 : index
//       AVX2:   arith.cmpi sge, %{{.*}}, %[[C6]]
//       AVX2:   scf.parallel
//       AVX2:   scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[C6]]
// AVX2-COUNT-12: vector.load %{{.*}} : memref<1x?x32xf32>, vector<8xf32>
//       AVX2:   scf.for {{.*}} iter_args
//       AVX2:   vector.load %{{.*}} : memref<64x32xf32>, vector<8xf32>
//       AVX2:   vector.broadcast %{{.*}} : f32 to vector<8xf32>
//       AVX2:   arith.mulf %{{.*}}, %{{.*}} fastmath<contract> : vector<8xf32>
//       AVX2:   arith.addf %{{.*}}, %{{.*}} fastmath<contract> : vector<8xf32>
//       AVX2:   scf.index_switch
//       AVX2:   case 5 {
//  AVX2-NOT:   vector<16xf32>

// AVX512-LABEL: func.func @projection
//   AVX512-DAG:   %[[C12:.*]] = arith.constant 12 : index
//       AVX512:   arith.cmpi sge, %{{.*}}, %[[C12]]
//       AVX512:   scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step (%c32{{(_[0-9]+)?}})
//       AVX512:   scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[C12]]
// AVX512-COUNT-24: vector.load %{{.*}} : memref<1x?x32xf32>, vector<16xf32>
//       AVX512:   scf.for {{.*}} iter_args
//  AVX512-COUNT-2:   vector.load %{{.*}} : memref<64x32xf32>, vector<16xf32>
//       AVX512:   vector.broadcast %{{.*}} : f32 to vector<16xf32>
//       AVX512:   arith.mulf %{{.*}}, %{{.*}} fastmath<contract> : vector<16xf32>
//       AVX512:   scf.index_switch
//       AVX512:   case 11 {
//   AVX512-NOT:   vector<8xf32>

// BAD: xfmr-tile-contractions: lanes must be 8 or 16
func.func @projection(%x: memref<1x?x64xf32>, %w: memref<64x32xf32>, %y: memref<1x?x32xf32>) {
  linalg.generic {indexing_maps = [#a, #w, #c], iterator_types = ["parallel", "reduction", "parallel", "parallel"]}
      ins(%x, %w : memref<1x?x64xf32>, memref<64x32xf32>) outs(%y : memref<1x?x32xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.mulf %i, %j : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  return
}

// 48 columns (an odd number of panels): one panel per tile on AVX-512 too.
// AVX512-LABEL: func.func @odd_panels
//       AVX512:   scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step (%c16{{(_[0-9]+)?}})
// AVX512-COUNT-12: vector.load %{{.*}} : memref<1x?x48xf32>, vector<16xf32>
//       AVX512:   scf.for {{.*}} iter_args
//       AVX512:   vector.load %{{.*}} : memref<64x48xf32>, vector<16xf32>
//   AVX512-NOT:   vector.load %{{.*}} : memref<64x48xf32>, vector<16xf32>
//       AVX512:   vector.broadcast
func.func @odd_panels(%x: memref<1x?x64xf32>, %w: memref<64x48xf32>, %y: memref<1x?x48xf32>) {
  linalg.generic {indexing_maps = [#a, #w, #c], iterator_types = ["parallel", "reduction", "parallel", "parallel"]}
      ins(%x, %w : memref<1x?x64xf32>, memref<64x48xf32>) outs(%y : memref<1x?x48xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.mulf %i, %j : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }
  return
}


// A product inside a loop (attention's p · v per KV block: [rows, tk] x
// [tk, 64], v a strided view of the pool) takes the kernels for any number
// of rows, with no `rows >= 6` test and no scf.parallel: its column tiles
// run in order on the thread that runs the enclosing loop's iteration.
#p = affine_map<(i, j, d) -> (i, j)>
#v = affine_map<(i, j, d) -> (j, d)>
#o = affine_map<(i, j, d) -> (i, d)>
// AVX2-LABEL: func.func @in_loop
//       AVX2:   scf.for
//   AVX2-NOT:   arith.cmpi sge
//   AVX2-NOT:   scf.parallel
//       AVX2:   scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c16
//       AVX2:   scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c6
//       AVX2:   fastmath<contract> : vector<8xf32>
//       AVX2:   scf.index_switch
//   AVX2-NOT:   linalg.generic
// AVX512-LABEL: func.func @in_loop
//   AVX512-NOT:   scf.parallel
//       AVX512:   scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c32
//       AVX512:   scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c12
//       AVX512:   fastmath<contract> : vector<16xf32>
//   AVX512-NOT:   linalg.generic
func.func @in_loop(%p: memref<?x?xf32>, %pool: memref<?x16x4x64xf32>, %acc: memref<?x64xf32>,
                   %blocks: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %tk = memref.dim %p, %c1 : memref<?x?xf32>
  scf.for %b = %c0 to %blocks step %c1 {
    %v = memref.subview %pool[%b, 0, 2, 0] [1, %tk, 1, 64] [1, 1, 1, 1]
        : memref<?x16x4x64xf32> to memref<?x64xf32, strided<[256, 1], offset: ?>>
    linalg.generic {indexing_maps = [#p, #v, #o],
                    iterator_types = ["parallel", "reduction", "parallel"]}
        ins(%p, %v : memref<?x?xf32>, memref<?x64xf32, strided<[256, 1], offset: ?>>)
        outs(%acc : memref<?x64xf32>) {
    ^bb0(%x: f32, %y: f32, %z: f32):
      %m = arith.mulf %x, %y fastmath<contract> : f32
      %s = arith.addf %z, %m fastmath<contract> : f32
      linalg.yield %s : f32
    }
  }
  return
}


// Scores inside a loop: C[i, j] += q[i, d] * k[j, d] with both read along d
// (k in place from the pool). Tiles of 4 rows x 4 keys: 16 accumulators of
// 16 lanes (FMAs along d), one butterfly of shuffles and adds to the 16
// sums, each stored only inside C. The same with either lane count.
#q = affine_map<(i, j, d) -> (i, d)>
#k = affine_map<(i, j, d) -> (j, d)>
#s = affine_map<(i, j, d) -> (i, j)>
// AVX2-LABEL: func.func @scores_in_loop
//       AVX2:   scf.for
//       AVX2:   scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c4
//       AVX2:   scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c4
//       AVX2:   scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c16{{.*}} iter_args
// AVX2-COUNT-16:   vector.fma %{{.*}} : vector<16xf32>
// AVX2-COUNT-30:   vector.shuffle
//       AVX2:   scf.if
//       AVX2:   vector.extract %{{.*}}[0] : f32 from vector<16xf32>
//   AVX2-NOT:   linalg.generic
// AVX512-LABEL: func.func @scores_in_loop
// AVX512-COUNT-16:   vector.fma %{{.*}} : vector<16xf32>
//   AVX512-NOT:   linalg.generic
func.func @scores_in_loop(%q: memref<?x64xf32>, %pool: memref<?x16x4x64xf32>,
                          %out: memref<?x?xf32>, %blocks: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %tk = memref.dim %out, %c1 : memref<?x?xf32>
  scf.for %b = %c0 to %blocks step %c1 {
    %k = memref.subview %pool[%b, 0, 1, 0] [1, %tk, 1, 64] [1, 1, 1, 1]
        : memref<?x16x4x64xf32> to memref<?x64xf32, strided<[256, 1], offset: ?>>
    linalg.generic {indexing_maps = [#q, #k, #s],
                    iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%q, %k : memref<?x64xf32>, memref<?x64xf32, strided<[256, 1], offset: ?>>)
        outs(%out : memref<?x?xf32>) {
    ^bb0(%x: f32, %y: f32, %z: f32):
      %m = arith.mulf %x, %y fastmath<reassoc, contract> : f32
      %s = arith.addf %z, %m fastmath<reassoc, contract> : f32
      linalg.yield %s : f32
    }
  }
  return
}
