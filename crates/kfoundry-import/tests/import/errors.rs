//! Models kfoundry cannot import get an error that names the node, its operator and what is
//! wrong; hostile or corrupted files never panic.

use crate::common;

use std::collections::BTreeMap;

use common::{ai, astr, ints, G};
use kfoundry_import::{import, ImportError};

fn resize(scales: &[f32]) -> G {
    G::new()
        .input("x", &[1, 1, 5, 5])
        .init("roi", &[0], vec![])
        .init("sc", &[scales.len()], scales.to_vec())
        .node("Resize", &["x", "roi", "sc"], &["y"], vec![])
        .output("y")
}

fn einsum(equation: &str, a: &[usize], b: &[usize]) -> G {
    G::new()
        .input("a", a)
        .input("b", b)
        .node(
            "Einsum",
            &["a", "b"],
            &["y"],
            vec![common::astr("equation", equation)],
        )
        .output("y")
}

fn error(g: &G) -> String {
    match import(&g.bytes(), &Default::default()) {
        Ok(_) => panic!("imported"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn an_unsupported_operator_names_the_node_and_the_supported_list() {
    let g = G::new()
        .input("x", &[4, 4])
        .node("Det", &["x"], &["y"], vec![])
        .output("y");
    let e = error(&g);
    assert!(
        e.starts_with(
            "node `det_0`: operator `Det` is not supported; supported operators: Abs, Acos, Add,"
        ),
        "{e}"
    );
    assert!(e.contains("Conv") && e.contains("Softmax"), "{e}");
}

#[test]
fn model_level_problems() {
    let old = G::opset(12)
        .input("x", &[4])
        .node("Relu", &["x"], &["y"], vec![])
        .output("y");
    assert!(
        error(&old).contains("opset 12; kfoundry imports opset 13 and later"),
        "{}",
        error(&old)
    );
    let sym = G::new()
        .symbolic_input("x", "batch", &[4])
        .node("Relu", &["x"], &["y"], vec![])
        .output("y");
    assert!(
        error(&sym)
            .contains("dimension 0 is the symbol `batch`; give it a value with `--dim batch=N`"),
        "{}",
        error(&sym)
    );
    let dims = BTreeMap::from([("batch".to_string(), 3)]);
    let imported = import(
        &sym.bytes(),
        &kfoundry_import::Options {
            dims,
            ..Default::default()
        },
    )
    .expect("with --dim");
    assert_eq!(
        imported.fused.graph.values[imported.fused.graph.inputs[0]].shape,
        [3, 4]
    );
    let passthrough = G::new().input("x", &[4]).output("x");
    assert!(
        error(&passthrough).contains("nothing computes it"),
        "{}",
        error(&passthrough)
    );
    assert!(matches!(
        import(b"not a model at all", &Default::default()),
        Err(ImportError::Decode(_))
    ));
}

#[test]
fn node_level_problems() {
    let cases: Vec<(G, &str)> = vec![
        (
            G::new()
                .input("x", &[2, 3, 4])
                .input("i", &[2])
                .node("Gather", &["x", "i"], &["y"], vec![])
                .output("y"),
            "node `gather_0` (Gather): the indices must be an integer constant",
        ),
        (
            G::new()
                .input("x", &[2, 3, 4])
                .int64s("p", &[0, 0, -1, 0, 0, 0])
                .node("Pad", &["x", "p"], &["y"], vec![])
                .output("y"),
            "negative pads",
        ),
        (
            G::new()
                .input("x", &[2, 3])
                .input("z", &[4])
                .node("Add", &["x", "z"], &["y"], vec![])
                .output("y"),
            "node `add_0` (Add): shapes [2, 3] and [4] do not broadcast",
        ),
        (
            G::new()
                .input("x", &[1, 2, 5, 5])
                .weight("w", &[2, 2, 3, 3], 1)
                .node("Conv", &["x", "w"], &["y"], vec![ints("strides", &[0, 1])])
                .output("y"),
            "node `conv_0` (Conv): `strides` = [0, 1]: expected 2 values in 1..=65536",
        ),
        (
            G::new()
                .input("x", &[1, 2, 5, 5])
                .node(
                    "MaxPool",
                    &["x"],
                    &["y", "indices"],
                    vec![
                        ints("kernel_shape", &[2, 2]),
                        ints("strides", &[2, 2]),
                        ai("ceil_mode", 1),
                    ],
                )
                .output("y"),
            "only the first output is supported",
        ),
        (
            G::new()
                .input("x", &[4])
                .node("Relu", &["x"], &["y"], vec![ai("alpha", 1)])
                .output("y"),
            "node `relu_0` (Relu): attribute `alpha` is not supported",
        ),
        (
            G::new()
                .input("x", &[4])
                .node("Relu", &["nope"], &["y"], vec![])
                .output("y"),
            "input `nope` is not computed before this node",
        ),
        (
            G::new()
                .input("x", &[2, 3])
                .input("s", &[2])
                .node("Reshape", &["x", "s"], &["y"], vec![])
                .output("y"),
            "must be an int64 constant",
        ),
        (
            G::new()
                .input("x", &[1 << 21, 1 << 20])
                .node("Relu", &["x"], &["y"], vec![])
                .output("y"),
            "has more than 1099511627776 elements",
        ),
        // Resize, CumSum and Einsum given what no exporter writes.
        (resize(&[1.0, 1.0, 0.0, 1.0]), "scale 0 for extent 5"),
        (resize(&[1.0, 1.0, f32::NAN, 1.0]), "scale NaN"),
        (
            resize(&[1.0, 1.0, 1e30, 1.0]),
            "scale 1000000000000000000000000000000 for extent 5",
        ),
        (resize(&[1.0, 1.0]), "exactly one of scales and sizes"),
        (
            G::new()
                .input("x", &[1, 1, 5, 5])
                .init("roi", &[0], vec![])
                .init("sc", &[0], vec![])
                .int64s("sz", &[1, 1, -3, 2])
                .node("Resize", &["x", "roi", "sc", "sz"], &["y"], vec![])
                .output("y"),
            "size -3",
        ),
        (
            G::new()
                .input("x", &[1, 1, 5, 5])
                .init("roi", &[0], vec![])
                .init("sc", &[4], vec![1.0; 4])
                .node(
                    "Resize",
                    &["x", "roi", "sc"],
                    &["y"],
                    vec![astr("mode", "cubic")],
                )
                .output("y"),
            "mode `cubic` is not supported",
        ),
        (
            G::new()
                .input("x", &[3, 4])
                .init_ints("a", &[], &[2])
                .node("CumSum", &["x", "a"], &["y"], vec![])
                .output("y"),
            "axis 2",
        ),
        (
            G::new()
                .input("x", &[3, 4])
                .input("a", &[1])
                .node("CumSum", &["x", "a"], &["y"], vec![])
                .output("y"),
            "must be an int64 constant",
        ),
        (
            einsum("ij,jk->ik", &[3, 4], &[5, 6]),
            "index `j` is 4 in one operand and 5 in the other",
        ),
        (
            einsum("ij,jk,kl->il", &[3, 4], &[4, 5]),
            "two operands expected",
        ),
        (
            einsum("i.j,jk->ik", &[3, 4], &[4, 5]),
            "indices are ASCII letters",
        ),
        (
            einsum("ijk,jk->ik", &[3, 4], &[4, 5]),
            "the operands have shapes [3, 4] and [4, 5]",
        ),
        (
            einsum("...ij,...jk->...ik", &[2, 2, 3, 4], &[2, 4, 5]),
            "`...` stands for different numbers of dimensions",
        ),
        (einsum("", &[3, 4], &[4, 5]), "two operands expected"),
        (einsum("->", &[3, 4], &[4, 5]), "two operands expected"),
    ];
    for (g, expected) in cases {
        let e = error(&g);
        assert!(e.contains(expected), "expected `{expected}` in `{e}`");
    }
}

#[test]
fn names_from_the_model_reach_the_terminal_as_printable_text() {
    // A node named with a terminal escape and a line break.
    let mut m = kfoundry_import::onnx::decode(
        &G::new()
            .input("x", &[4])
            .node("Det", &["x"], &["y"], vec![])
            .output("y")
            .bytes(),
    )
    .unwrap();
    m.graph.as_mut().unwrap().node[0].name = "\u{1b}[2J\nrm -rf".into();
    let e = import(&kfoundry_import::onnx::encode(&m), &Default::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.starts_with("node `?[2J?rm -rf`: operator `Det`"), "{e:?}");
}

/// A chain of thousands of element-wise nodes is one kernel, imported in linear time.
#[test]
fn long_chains_fuse_into_one_kernel() {
    let mut g = G::new().input("x0", &[8]);
    let n = 5000;
    for i in 0..n {
        g = g.node(
            "Relu",
            &[&format!("x{i}")],
            &[&format!("x{}", i + 1)],
            vec![],
        );
    }
    let g = g.output(&format!("x{n}"));
    let imported = import(&g.bytes(), &Default::default()).unwrap();
    assert_eq!(imported.kernels.len(), 1);
    assert_eq!(imported.fused.groups[0].chain.steps.len(), n);
}

/// Thousands of corruptions of a valid model: every one is imported or refused, none panics.
#[test]
fn corrupted_files_never_panic() {
    let g = G::new()
        .input("x", &[2, 3, 8, 8])
        .weight("w", &[4, 3, 3, 3], 1)
        .weight("b", &[4], 2)
        .int64s("shape", &[2, -1])
        .node(
            "Conv",
            &["x", "w", "b"],
            &["c"],
            vec![ints("pads", &[1, 1, 1, 1])],
        )
        .node("Relu", &["c"], &["r"], vec![])
        .node(
            "MaxPool",
            &["r"],
            &["p"],
            vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
        )
        .node("Reshape", &["p", "shape"], &["f"], vec![])
        .node("Softmax", &["f"], &["y"], vec![ai("axis", 1)])
        .output("y");
    let bytes = g.bytes();
    let mut s = 0x1234_5678_9abc_def1u64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let (mut ok, mut refused) = (0, 0);
    for _ in 0..3000 {
        let mut b = bytes.clone();
        for _ in 0..1 + next() % 4 {
            let i = (next() % b.len() as u64) as usize;
            b[i] = match next() % 3 {
                0 => next() as u8,
                1 => b[i] ^ (1 << (next() % 8)),
                _ => 0xff,
            };
        }
        let result =
            std::panic::catch_unwind(|| import(&b, &Default::default()).map(|i| i.kernels.len()));
        match result {
            Ok(Ok(_)) => ok += 1,
            Ok(Err(_)) => refused += 1,
            Err(_) => panic!("import panicked on a corrupted file: {b:?}"),
        }
    }
    assert!(refused > 0 && ok > 0, "{ok} imported, {refused} refused");
}

/// Weights in a file beside the model are read from the model's folder, and from nowhere else:
/// not through `..`, an absolute path or a link that leaves the folder, not past a file's end.
#[test]
fn external_data_is_read_from_the_models_folder_only() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("model");
    std::fs::create_dir(&models).unwrap();
    let graph = |location: &str, offset: usize| {
        G::new()
            .input("x", &[2, 3])
            .weight("w", &[2, 3], 7)
            .node("Add", &["x", "w"], &["y"], vec![])
            .output("y")
            .external("w", location, offset)
    };
    let read = |g: &G| {
        import(
            &g.bytes(),
            &kfoundry_import::Options {
                data_dir: Some(models.clone()),
                ..Default::default()
            },
        )
    };

    // Inside the folder, at an offset: read, and the generated crate's test gets it inline.
    let (g, raw) = graph("weights/w.bin", 5);
    std::fs::create_dir(models.join("weights")).unwrap();
    std::fs::write(
        models.join("weights/w.bin"),
        [vec![0u8; 5], raw.clone(), vec![9u8; 3]].concat(),
    )
    .unwrap();
    let imported = read(&g).expect("external data inside the folder");
    let copy =
        kfoundry_import::onnx::decode(imported.model_copy.as_deref().expect("a copy")).unwrap();
    let w = &copy.graph.as_ref().unwrap().initializer[0];
    assert_eq!((w.data_location, &w.raw_data), (0, &raw));
    // Without a folder to read from, the model is refused with the tensor named.
    assert!(
        error(&g).contains("`w`") && error(&g).contains("external"),
        "{}",
        error(&g)
    );

    // Outside the folder: refused before any file is opened.
    std::fs::write(dir.path().join("secret.bin"), &raw).unwrap();
    for location in [
        "../secret.bin",
        "weights/../../secret.bin",
        "/etc/hostname",
        "",
    ] {
        let e = read(&graph(location, 0).0)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tensor `w`") && e.contains("only a file inside the model's folder is read"),
            "{location}: {e}"
        );
    }
    // A link inside the folder that leads out of it.
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(dir.path().join("secret.bin"), models.join("link.bin")).unwrap();
        let e = read(&graph("link.bin", 0).0)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(e.contains("resolves outside the model's folder"), "{e}");
    }
    // A region that is not the tensor's size.
    let (short, _) = G::new()
        .input("x", &[2, 3])
        .weight("w", &[2, 3], 7)
        .node("Add", &["x", "w"], &["y"], vec![])
        .output("y")
        .external_claiming("w", "weights/w.bin", 5, Some(20));
    let e = read(&short).map(|_| ()).unwrap_err().to_string();
    assert!(
        e.contains("20 bytes of external data where its dims [2, 3] of float32 need 24"),
        "{e}"
    );
    // A region past the file's end, and a folder where a file should be.
    let e = read(&graph("weights/w.bin", 10).0)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("past the end of"), "{e}");
    let e = read(&graph("weights", 0).0)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a regular file"), "{e}");
}

/// Every annotation the importer writes is read back by kfoundry's own parser before the crate
/// exists; one the parser refuses (here a parameter that appears nowhere, as a generator bug
/// would leave it) is an error naming the kernel, not a crate that fails to build.
#[test]
fn generated_annotations_are_read_back_by_the_parser() {
    let g = G::new()
        .input("x", &[4, 256])
        .node("Relu", &["x"], &["y"], vec![])
        .output("y");
    let imported = import(&g.bytes(), &Default::default()).unwrap();
    let mut kernel = imported.kernels[0].clone();
    assert_eq!(kfoundry_import::emit::check_annotation(&kernel), Ok(()));
    kernel.params.push(("UNUSED".into(), "[1, 2]".into()));
    kernel.reference.push(("UNUSED".into(), 1));
    let refused = kfoundry_import::emit::check_annotation(&kernel).unwrap_err();
    assert!(refused.contains("`UNUSED` appears nowhere"), "{refused}");
    kernel.params.pop();
    kernel.reference.pop();
    kernel.global = vec!["n_missing".into()];
    let refused = kfoundry_import::emit::check_annotation(&kernel).unwrap_err();
    assert!(refused.contains("n_missing"), "{refused}");
}

/// Every operator the node dispatch routes to the element-wise readers is one they read (a
/// name in one list and not in the other was a panic, `unreachable!`), and is listed as
/// supported: adding an element-wise operator is one name in `graph::UNARY` or `BINARY` and
/// its arm in the reader, and this test fails until both exist.
#[test]
fn every_element_wise_operator_the_dispatch_names_is_read() {
    use kfoundry_import::graph::{BINARY, SUPPORTED, UNARY};
    for (ops, inputs) in [(UNARY, &["x"][..]), (BINARY, &["x", "z"][..])] {
        for op in ops {
            assert!(SUPPORTED.contains(op), "`{op}` is not in graph::SUPPORTED");
            let attrs = match *op {
                "Cast" => vec![common::ai("to", 1)],
                _ => vec![],
            };
            let g = common::G::new()
                .input("x", &[2, 3])
                .input("z", &[2, 3])
                .node(op, inputs, &["y"], attrs)
                .output("y");
            let imported = std::panic::catch_unwind(|| {
                kfoundry_import::import(&g.bytes(), &Default::default())
            });
            match imported {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => panic!("`{op}` is not read: {e}"),
                Err(_) => panic!("`{op}` panicked"),
            }
        }
    }
}
