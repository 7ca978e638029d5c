//! File-system helpers shared by everything kfoundry writes: atomic replacement and
//! file-name-safe forms of kernel ids and device keys.

use std::io::Write as _;
use std::path::Path;

/// Replaces `path` with `bytes` atomically: a temporary file in the same directory, fsync,
/// then rename, so a reader (or a crash) sees the old file or the new one, never a torn one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut tmp = tempfile::Builder::new().prefix(&format!(".{name}.")).tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// `text` with every character other than ASCII letters, digits, `_` and `-` replaced by `_`
/// (`pkg::Kernel` → `pkg__Kernel`).
pub fn safe_name(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_atomically_and_names_safely() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.txt");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
        assert_eq!(safe_name("kfoundry-examples::Sgemm|x y"), "kfoundry-examples__Sgemm_x_y");
    }
}
