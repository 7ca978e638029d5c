//! Generated kernel sources (source-level variants written by the language-model operator):
//! stored beside the lockfile as `kfoundry/<kernel>/<hash>.cl`, referenced from a lockfile
//! variant by `hash`, embedded by the macro only when the file's content still has that hash.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Hex digits of SHA-256 kept in a source hash.
const HASH_LEN: usize = 16;

/// The hash a generated source is stored and referenced under.
pub fn source_hash(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .take(HASH_LEN / 2)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Directory of `kernel`'s generated sources beside `lockfile` (`::` and other characters
/// not safe in a file name become `_`).
pub fn kernel_dir(lockfile: &Path, kernel: &str) -> PathBuf {
    lockfile
        .parent()
        .unwrap_or(Path::new("."))
        .join("kfoundry")
        .join(crate::files::safe_name(kernel))
}

/// Where the source of `hash` lives.
pub fn source_path(lockfile: &Path, kernel: &str, hash: &str) -> PathBuf {
    kernel_dir(lockfile, kernel).join(format!("{hash}.cl"))
}

/// Why a referenced generated source cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GeneratedError {
    #[error("generated source {path} is missing")]
    Missing { path: PathBuf },
    #[error("generated source {path} was edited: its content hashes to {actual}, the lockfile says {expected}")]
    Modified {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("generated source {path}: {message}")]
    Unreadable { path: PathBuf, message: String },
    #[error("`{hash}` is not a source hash")]
    BadHash { hash: String },
}

/// Reads the source of `hash` and checks that its content still has that hash.
pub fn read_verified(
    lockfile: &Path,
    kernel: &str,
    hash: &str,
) -> Result<(PathBuf, String), GeneratedError> {
    if hash.len() != HASH_LEN || !hash.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(GeneratedError::BadHash {
            hash: hash.to_string(),
        });
    }
    let path = source_path(lockfile, kernel, hash);
    let text = match crate::files::read_text_bounded(
        &path,
        crate::files::MAX_GENERATED_BYTES,
        "generated source",
    ) {
        Ok(t) => t,
        Err(e) if e.is_not_found() => return Err(GeneratedError::Missing { path }),
        Err(e) => {
            return Err(GeneratedError::Unreadable {
                path,
                message: e.to_string(),
            })
        }
    };
    let actual = source_hash(&text);
    if actual != hash {
        return Err(GeneratedError::Modified {
            path,
            expected: hash.to_string(),
            actual,
        });
    }
    Ok((path, text))
}

/// Stores `text` as a generated source of `kernel` (atomically; an existing file of the same
/// hash has the same content and is left alone). Returns its hash.
pub fn write(lockfile: &Path, kernel: &str, text: &str) -> std::io::Result<String> {
    let hash = source_hash(text);
    let path = source_path(lockfile, kernel, &hash);
    if read_verified(lockfile, kernel, &hash).is_ok() {
        return Ok(hash);
    }
    std::fs::create_dir_all(kernel_dir(lockfile, kernel))?;
    crate::files::write_atomic(&path, text.as_bytes())?;
    Ok(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_and_detect_edits() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("Kfoundry.lock");
        let src = "__kernel void k(__global float* y) { y[0] = 1.0f; }";
        let hash = write(&lock, "pkg::K", src).unwrap();
        assert_eq!(hash.len(), 16);
        assert_eq!(
            source_path(&lock, "pkg::K", &hash),
            dir.path().join(format!("kfoundry/pkg__K/{hash}.cl"))
        );
        assert_eq!(read_verified(&lock, "pkg::K", &hash).unwrap().1, src);
        std::fs::write(
            source_path(&lock, "pkg::K", &hash),
            format!("{src}\n// edited"),
        )
        .unwrap();
        assert!(matches!(
            read_verified(&lock, "pkg::K", &hash),
            Err(GeneratedError::Modified { .. })
        ));
        assert!(matches!(
            read_verified(&lock, "pkg::K", "0123456789abcdef"),
            Err(GeneratedError::Missing { .. })
        ));
        assert!(matches!(
            read_verified(&lock, "pkg::K", "../../etc/passwd"),
            Err(GeneratedError::BadHash { .. })
        ));
    }
}
