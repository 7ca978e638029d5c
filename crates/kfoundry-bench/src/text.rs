//! Text that comes from outside kfoundry, made safe to print.

/// Text from outside kfoundry (a lockfile's device names, a kernel's `printf`, a model's or a
/// bundle's names) as it may reach a terminal: control characters other than newline and tab
/// (the escape that starts a terminal's control sequences, a carriage return that hides what
/// came before), and the Unicode controls that reorder or hide text, are written as `\u{..}`.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
    };
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}
