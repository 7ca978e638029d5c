//! `cargo kfoundry`: tune annotated OpenCL kernels on the local device and write
//! Kfoundry.lock. A thin shell over the `cargo_kfoundry` library: parse, run, map the result
//! to an exit status (documented in `error.rs` and the manual's `book/src/ci.md`).

fn main() {
    let cli = cargo_kfoundry::cli::parse();
    let exit = match cargo_kfoundry::run(&cli) {
        Ok(exit) => exit,
        Err(e) => {
            eprintln!("error: {}", kfoundry_tune::text::printable(&e.to_string()));
            e.exit()
        }
    };
    std::process::exit(exit.code());
}
