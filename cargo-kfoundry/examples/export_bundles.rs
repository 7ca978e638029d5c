//! Writes the bundles of the kernels written to cheat the verifier (`tests/cli/cheats.rs`) into
//! a folder, to tune them on a machine without a Rust toolchain (a GPU's: see
//! `bench/h200/4-trust-on-the-gpu.sh` and `bench/h200/17-adversarial-proof.sh`), with the
//! prelude every build of a generated source starts with on a GPU, in both flavours.
//!
//! `cargo run -p cargo-kfoundry --example export_bundles -- DIR`

#![allow(dead_code)]
// the tests' support modules have more than this needs
// The tests' bundle writer stops at the first failure with its message: right for a tool too.
#![allow(clippy::expect_used, clippy::panic)]

#[path = "../tests/cli/common/bundle.rs"]
mod bundle;
#[path = "../tests/cli/cheats.rs"]
mod cheats;

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        return Err("usage: export_bundles DIR".into());
    };
    std::fs::create_dir_all(&dir)?;
    for (name, args) in [
        ("Tail", cheats::tail_args()),
        ("Aspect", cheats::aspect_args()),
        ("InPlace", cheats::in_place_args()),
        ("Memo", cheats::memo_args()),
        ("PolyExp", cheats::poly_exp_args()),
        ("Relu", cheats::relu_args()),
        ("SoftmaxMax0", cheats::softmax_max_from_zero_args()),
        ("OnePassVar", cheats::one_pass_variance_args()),
        ("SumSquares", cheats::sum_of_squares_norm_args()),
        ("Persistent", cheats::persistent_tail_args()),
        ("IntGather", cheats::integer_gather_args()),
        ("ScalarTop", cheats::scalar_top_args()),
        ("HalfFlush", cheats::half_flush_args()),
        ("Bf16Off", cheats::bf16_off_args()),
        ("LocalRace", cheats::local_race_args()),
    ] {
        bundle::write(&dir, &format!("{name}.json"), name, &args);
    }
    bundle::write(&dir, "hostile.json", "Hostile", &cheats::hostile_args());
    bundle::write(&dir, "escape.json", "Escape", &cheats::escape_args());
    let kernel = "__kernel void k(__global float* y) { y[get_global_id(0)] = (float)get_group_id(0) + (float)get_global_linear_id(); }\n";
    for reversed in [false, true] {
        let text = kfoundry_rt::model::source_policy::generated_program(kernel, true, reversed);
        let name = format!("prelude-gpu{}.cl", if reversed { "-reversed" } else { "" });
        std::fs::write(dir.join(name), text)?;
    }
    println!("wrote the bundles into {}", dir.display());
    Ok(())
}
