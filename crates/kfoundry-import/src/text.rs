//! Text from the model (node names, operator types, attribute strings) made safe to show: in
//! errors, and inside the comments of the generated Rust and OpenCL C.

/// Text from the model, safe inside a comment of Rust or C: printable ASCII only (a name with a
/// line break could otherwise end the comment and inject code), at most `max` characters.
pub fn printable(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .take(max)
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect();
    if text.chars().count() > max {
        out.push_str("...");
    }
    out.replace("*/", "*?").replace("/*", "?*")
}
