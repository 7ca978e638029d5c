//! The suite's 3xTF32 tensor-core GEMM, from kfoundry's template library
//! (`kfoundry_tooling::library`, the text `examples/kernels/gemm.cl` includes) as parts for
//! generated kernels: its machinery (macros, helpers, the tile loader), then its main loop,
//! which leaves `acc[KM_MI][KM_NJ][4]`.
//!
//! A matrix product takes it as it is ([`Loader::Tiles`]: whole tiles copied by `cp.async`).
//! An implicit-GEMM convolution ([`Loader::Gather`]) brings its own `KM_LOAD_TILE` (an im2col
//! gather, zero outside the input and past the ends of m, n and k), its work-groups laid out as
//! the convolution's launch (pixels along dimension 0, channels along 1) and a ragged last
//! k-tile.

use super::{library_part, Precision};

/// The loop over an item's accumulators after the main loop: for each `acc[i][j][r]`, its
/// row (m) and column (n) in the whole product (the template's `KM_ROW` and `KM_COL`),
/// declared as `row` and `col`, then `body` (lines indented for the loop's inside).
pub(super) fn for_each_accumulator(row: &str, col: &str, body: &str) -> String {
    format!(
        "#pragma unroll
    for (int i = 0; i < KM_MI; ++i)
#pragma unroll
        for (int j = 0; j < KM_NJ; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) {{
                const int {row} = KM_ROW(i, r), {col} = KM_COL(j, r);
{body}            }}
"
    )
}

/// Where the main loop's tiles come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Loader {
    /// The template's own: full tiles of A (m x k) and B, 16-byte rows, through `cp.async`.
    Tiles,
    /// The kernel defines `KM_LOAD_TILE(st, kt)` itself; rows (m) are tiled along work-group
    /// dimension 0 and columns (n) along 1; `k` need not be a multiple of `TK`.
    Gather,
}

/// Where the template's tile loader starts: its `KM_LOAD_TILE` and `KM_LOAD_B`, and what they
/// work out once (`KM_LOAD_SETUP`, the chunk counts); the end of the machinery, which a
/// gathering kernel replaces with its own `KM_LOAD_TILE` (the main loop skips `KM_LOAD_SETUP`
/// when it is not defined).
const LOADER: &str = "/* Issues the copies of k-tile";

/// The template's two parts (machinery, main loop), without its `#error` guards (the
/// annotation's `require` states the same conditions, and generated sources carry no directive
/// beyond the allow-list). The template's own switches say what differs: `KM_SPLITS` (one
/// product of the TF32 parts, or three), and for a gathering loader `KM_GROUP_M`/`KM_GROUP_N`
/// (rows of the product along work-group dimension 0) and `KM_KTILES` (a ragged last k-tile).
pub(super) fn parts(precision: Precision, loader: Loader) -> (String, String) {
    let mut switches = String::new();
    if precision == Precision::Tf32 {
        switches += "#define KM_SPLITS 1\n";
    }
    if loader == Loader::Gather {
        switches += "#define KM_GROUP_M get_group_id(0)\n#define KM_GROUP_N get_group_id(1)\n#define KM_KTILES ((k + TK - 1) / TK)\n";
    }
    let mut machinery = switches + &library_part("tensor_core.cl");
    if loader == Loader::Gather {
        machinery.truncate(machinery.find(LOADER).expect("the template's tile loader"));
    }
    // The generated kernels name their operands `a` and `b`, as gemm.cl does.
    let main_loop = format!(
        "{}#define KM_A a\n#define KM_B b\n{}",
        library_part("tensor_core_tiles.cl"),
        library_part("tensor_core_loop.cl")
    );
    (machinery, main_loop)
}
