// RUN: xfmr-opt %s --split-input-file --verify-diagnostics --xfmr-checks-to-status | FileCheck %s

// A check in the function's own control flow returns at once: the status
// argument is appended, the check branches to one exit block that records
// its number (1 for the first check) and returns null descriptors.
// CHECK-LABEL: module attributes {xfmr.checks = ["id out of range at loc(a)", "n too large"]}
// CHECK-LABEL: func.func @entry(
//  CHECK-SAME:     %[[X:[^ ]*]]: memref<?xf32>, %[[ID:[^ ]*]]: index, %[[S:[^ ]*]]: memref<2xi64>)
//       CHECK:   %[[OK:.*]] = arith.cmpi ult, %[[ID]]
//       CHECK:   %[[C1:.*]] = arith.constant 1 : i64
//       CHECK:   cf.cond_br %[[OK]], ^[[REST:.*]], ^[[EXIT:.*]](%[[C1]] : i64)
//       CHECK: ^[[REST]]:
//       CHECK:   %[[C2:.*]] = arith.constant 2 : i64
//       CHECK:   cf.cond_br %{{.*}}, ^[[REST2:.*]], ^[[EXIT]](%[[C2]] : i64)
//       CHECK: ^[[REST2]]:
//       CHECK:   return %[[X]]
//       CHECK: ^[[EXIT]](%[[CODE:.*]]: i64):
//       CHECK:   memref.generic_atomic_rmw %[[S]][%{{.*}}] : memref<2xi64> {
//       CHECK:     arith.cmpi eq
//       CHECK:     arith.select %{{.*}}, %[[CODE]], %{{.*}} : i64
//       CHECK:   %[[NULL:.*]] = llvm.mlir.zero : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
//       CHECK:   %[[M:.*]] = builtin.unrealized_conversion_cast %[[NULL]] {{.*}} to memref<?xf32>
//       CHECK:   return %[[M]]
module {
  func.func @entry(%x: memref<?xf32>, %id: index) -> memref<?xf32>
      attributes {llvm.emit_c_interface} {
    %c0 = arith.constant 0 : index
    %n = memref.dim %x, %c0 : memref<?xf32>
    %c8 = arith.constant 8 : index
    %ok = arith.cmpi ult, %id, %n : index
    cf.assert %ok, "id out of range at loc(a)"
    %small = arith.cmpi ult, %n, %c8 : index
    cf.assert %small, "n too large"
    return %x : memref<?xf32>
  }
}

// -----

// A check inside a region the function cannot return from (an OpenMP loop)
// records its failure and falls through to the rest of the body.
// CHECK-LABEL: func.func @parallel(
//  CHECK-SAME:     %[[S:[^ ]*]]: memref<2xi64>)
//       CHECK:   omp.loop_nest
//       CHECK:     cf.cond_br %{{.*}}, ^[[REST:.*]], ^[[RECORD:.*]]
//       CHECK:   ^[[RECORD]]:
//       CHECK:     memref.generic_atomic_rmw %[[S]]
//       CHECK:     cf.br ^[[REST]]
//       CHECK:   ^[[REST]]:
//       CHECK:     memref.store
//   CHECK-NOT:   cf.assert
module {
  func.func @parallel(%out: memref<?xf32>, %n: index) attributes {llvm.emit_c_interface} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %v = arith.constant 1.0 : f32
    omp.parallel {
      omp.wsloop {
        omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
          %ok = arith.cmpi ult, %i, %c4 : index
          cf.assert %ok, "i past 4"
          memref.store %v, %out[%i] : memref<?xf32>
          omp.yield
        }
      }
      omp.terminator
    }
    return
  }
}

// -----

// Without checks the function still gets its status argument (the ABI is
// the same for every model) and the module an empty table.
// CHECK-LABEL: module attributes {xfmr.checks = []}
// CHECK-LABEL: func.func @no_checks(
//  CHECK-SAME:     %{{.*}}: memref<2xi64>)
module {
  func.func @no_checks(%x: memref<4xf32>) -> memref<4xf32> attributes {llvm.emit_c_interface} {
    return %x : memref<4xf32>
  }
}

// -----

// A check in a function an entry calls (a layer function of
// xfmr-outline-layers) records into the caller's status and carries on.
// CHECK-LABEL: module attributes {xfmr.checks = ["layer check"]}
// CHECK-LABEL: func.func private @helper(
//  CHECK-SAME:     %[[OK:[^ ]*]]: i1, %[[S:[^ ]*]]: memref<2xi64>)
//       CHECK:   cf.cond_br %[[OK]], ^[[REST:.*]], ^[[RECORD:[^ ]*]]
//       CHECK: ^[[RECORD]]:
//       CHECK:   memref.generic_atomic_rmw %[[S]]
//       CHECK:   cf.br ^[[REST]]
//       CHECK: ^[[REST]]:
//       CHECK:   return
//       CHECK: func.func @entry(%[[OK2:[^ ]*]]: i1, %[[S2:[^ ]*]]: memref<2xi64>)
//       CHECK:   call @helper(%[[OK2]], %[[S2]]) : (i1, memref<2xi64>) -> ()
module {
  func.func private @helper(%ok: i1) {
    cf.assert %ok, "layer check"
    return
  }
  func.func @entry(%ok: i1) attributes {llvm.emit_c_interface} {
    call @helper(%ok) : (i1) -> ()
    return
  }
}

// -----

// A function with checks called from one that has no status to give it.
module {
  func.func private @helper(%ok: i1) {
    cf.assert %ok, "unreachable status"
    return
  }
  func.func private @middle(%ok: i1) {
    // expected-error @below {{a function with run-time checks called from a function without a status}}
    call @helper(%ok) : (i1) -> ()
    return
  }
  func.func @entry(%ok: i1) attributes {llvm.emit_c_interface} {
    call @middle(%ok) : (i1) -> ()
    return
  }
}
