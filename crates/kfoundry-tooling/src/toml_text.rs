//! TOML read from a file: its errors said as compilers say theirs, `path:line:col: message`
//! (a syntax error, or a value of the wrong shape, at the place `toml` found it), and where a
//! table's keys are, for mistakes found after parsing.

use std::collections::BTreeMap;
use std::path::Path;

/// A place in a text: 1-based line and column (the column in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub line: usize,
    pub column: usize,
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// The place of byte `offset` of `text` (the end of the text when beyond it).
pub fn place(text: &str, offset: usize) -> Place {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    Place {
        line: before.matches('\n').count() + 1,
        column: before[start..].chars().count() + 1,
    }
}

/// An error of `toml` reading `text`, the contents of `path`: its message alone (without the
/// excerpt and caret `toml` draws), and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TomlError {
    /// `path:line:col` (`path` when `toml` gave no place).
    pub at: String,
    pub message: String,
}

impl TomlError {
    pub fn new(path: &Path, text: &str, e: &toml::de::Error) -> TomlError {
        let at = match e.span() {
            Some(span) => format!("{}:{}", path.display(), place(text, span.start)),
            None => path.display().to_string(),
        };
        TomlError {
            at,
            message: e.message().trim().to_string(),
        }
    }
}

impl std::fmt::Display for TomlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}

impl std::error::Error for TomlError {}

/// `text` (the contents of `path`) as `T`, or the error with its place.
pub fn parse<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T, TomlError> {
    toml::from_str(text).map_err(|e| TomlError::new(path, text, &e))
}

/// Where each key of the top-level table of `text` is (the place of its value); empty when
/// `text` is not a table.
pub fn key_places(text: &str) -> BTreeMap<String, Place> {
    toml::from_str::<BTreeMap<String, toml::Spanned<toml::Value>>>(text)
        .map(|table| {
            table
                .into_iter()
                .map(|(key, value)| (key, place(text, value.span().start)))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_count_lines_and_characters_from_one() {
        let text = "a = 1\nb = \"é\" x\n";
        assert_eq!(place(text, 0), Place { line: 1, column: 1 });
        assert_eq!(place(text, 6), Place { line: 2, column: 1 });
        // after `é` (two bytes): the ninth character of line 2
        let x = text.find('x').unwrap();
        assert_eq!(place(text, x), Place { line: 2, column: 9 });
        assert_eq!(place(text, 1000), Place { line: 3, column: 1 });
    }

    #[test]
    fn errors_say_path_line_and_column() {
        let path = Path::new("dir/conf.toml");
        let e = parse::<toml::Table>(path, "a = 1\nb = = 2\n").unwrap_err();
        assert!(e.to_string().starts_with("dir/conf.toml:2:5: "), "{e}");
        assert!(!e.message.contains('|'), "no excerpt: {e}");
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Shape {
            n: u32,
        }
        let e = parse::<Shape>(path, "\n\nn = \"many\"\n").unwrap_err();
        assert!(e.to_string().starts_with("dir/conf.toml:3:5: "), "{e}");
        assert_eq!(
            key_places("x = 1\n\n  y = [1,\n 2]\n")["y"],
            Place { line: 3, column: 7 }
        );
    }
}
