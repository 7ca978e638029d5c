//! The manual (`book/`, an mdBook) and the README hold together: `book/src/SUMMARY.md` lists
//! every chapter and nothing else, and every relative link of the README and of the chapters
//! reaches a file that exists and, with `#anchor`, a heading of that file (mdBook, which
//! `.ci/run` also runs, renders the book but does not check these).
//!
//! What counts as a link is Markdown's: `[text](target)` and `![alt](target)` (and a reference
//! definition `[name]: target`) outside fenced code blocks and inline code spans, with `\[`
//! escapes honoured. Anchors are made from headings outside fenced code as GitHub and mdBook make
//! them (see [`anchor`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

/// The repository's root: the `kfoundry` package's manifest directory.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The directory of the book's chapters.
fn book_src() -> PathBuf {
    root().join("book").join("src")
}

/// The anchor GitHub and mdBook give a heading: its text lowercased, each whitespace character
/// a `-`, every other character that is not a letter, a digit, `-` or `_` dropped (backticks,
/// `:`, `(`, `,` ...). The target of a link in the heading is left out (its text stays). The two
/// agree but for capitals outside ASCII, which mdBook leaves as they are; this is GitHub's.
fn anchor(heading: &str) -> String {
    let mut text = String::new();
    let mut chars = heading.trim().chars().peekable();
    while let Some(c) = chars.next() {
        if c == ']' && chars.peek() == Some(&'(') {
            // `[text](target)`: keep the text, drop the target.
            let mut depth = 0usize;
            for t in chars.by_ref() {
                match t {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
            }
            continue;
        }
        text.push(c);
    }
    let mut out = String::new();
    for c in text.trim().chars() {
        if c.is_whitespace() {
            out.push('-');
        } else if c.is_alphanumeric() || c == '-' || c == '_' {
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// Whether `line` opens or closes a fenced code block: returns the fence's character and length.
fn fence(line: &str) -> Option<(u8, usize)> {
    let t = line.trim_start().as_bytes();
    let c = *t.first()?;
    if c != b'`' && c != b'~' {
        return None;
    }
    let n = t.iter().take_while(|&&b| b == c).count();
    (n >= 3).then_some((c, n))
}

/// The lines of a Markdown file, each with its number (from 1) and whether it lies in a fenced
/// code block (the fence lines themselves included).
fn classify(text: &str) -> Vec<(usize, &str, bool)> {
    let mut open: Option<(u8, usize)> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        match (open, fence(line)) {
            (None, Some(f)) => {
                open = Some(f);
                out.push((i + 1, line, true));
            }
            (Some((c, n)), Some((c2, n2)))
                if c == c2 && n2 >= n && line.trim().bytes().all(|b| b == c) =>
            {
                open = None;
                out.push((i + 1, line, true));
            }
            (Some(_), _) => out.push((i + 1, line, true)),
            (None, None) => out.push((i + 1, line, false)),
        }
    }
    out
}

/// The text of an ATX heading (`## Text`, up to three spaces before it; a closing run of `#`
/// dropped), or `None`.
fn atx_heading(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let t = &line[indent..];
    let level = t.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &t[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let rest = rest.trim();
    let without_closing = rest.trim_end_matches('#');
    if without_closing.is_empty() || without_closing.ends_with([' ', '\t']) {
        Some(without_closing.trim_end())
    } else {
        Some(rest)
    }
}

/// Whether `line` underlines the line before it as a setext heading (`===` or `---`).
fn setext_underline(line: &str) -> bool {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let t = line.trim();
    indent <= 3 && !t.is_empty() && (t.bytes().all(|b| b == b'=') || t.bytes().all(|b| b == b'-'))
}

/// Every anchor of a Markdown file's headings (outside fenced code), a repeated heading's
/// second anchor with `-1` appended, its third with `-2`, as GitHub and mdBook number them.
fn anchors(text: &str) -> BTreeSet<String> {
    let lines = classify(text);
    let mut headings = Vec::new();
    for (i, &(_, line, in_code)) in lines.iter().enumerate() {
        if in_code {
            continue;
        }
        if let Some(h) = atx_heading(line) {
            headings.push(h.to_string());
        } else if i > 0 && setext_underline(line) {
            let (_, previous, previous_in_code) = lines[i - 1];
            let plain = !previous_in_code
                && !previous.trim().is_empty()
                && atx_heading(previous).is_none()
                && !previous.trim_start().starts_with(['-', '*', '+', '|', '>']);
            if plain {
                headings.push(previous.trim().to_string());
            }
        }
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for h in headings {
        let base = anchor(&h);
        let count = seen.entry(base.clone()).or_insert(0);
        out.insert(if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        });
        *count += 1;
    }
    out
}

/// Where a code span that starts at `start` (a run of backticks) ends: just past its closing
/// run of as many backticks, or just past the opening run when nothing closes it (then the
/// backticks are literal text).
fn skip_code_span(b: &[u8], start: usize) -> usize {
    let n = b[start..].iter().take_while(|&&c| c == b'`').count();
    let mut i = start + n;
    while i < b.len() {
        if b[i] == b'`' {
            let m = b[i..].iter().take_while(|&&c| c == b'`').count();
            if m == n {
                return i + m;
            }
            i += m;
        } else {
            i += 1;
        }
    }
    start + n
}

/// Where the `]` that closes the `[` at `open` is (brackets nest; escapes and code spans are
/// skipped).
fn closing_bracket(b: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'`' => {
                i = skip_code_span(b, i);
                continue;
            }
            b'[' => depth += 1,
            b']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The target of `(target "title")` whose `(` is at `open`, and where it ends.
fn destination(b: &[u8], open: usize) -> Option<(String, usize)> {
    let mut depth = 0usize;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    let inside = std::str::from_utf8(&b[open + 1..i]).ok()?.trim();
                    let target = if let Some(rest) = inside.strip_prefix('<') {
                        rest.split('>').next().unwrap_or("")
                    } else {
                        inside.split_whitespace().next().unwrap_or("")
                    };
                    return Some((target.to_string(), i + 1));
                }
            }
            b'\n' if depth > 0 && b.get(i + 1) == Some(&b'\n') => return None,
            _ => {}
        }
        i += 1;
    }
    None
}

/// Every link of a Markdown text: its line (from 1) and its target.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    // Paragraphs (runs of lines outside fenced code, up to a blank line) are scanned whole,
    // since a code span may continue on the next line.
    let mut block: Vec<(usize, &str)> = Vec::new();
    let lines = classify(text);
    for (number, line, in_code) in lines {
        if in_code || line.trim().is_empty() {
            scan_block(&block, &mut out);
            block.clear();
        } else {
            block.push((number, line));
        }
    }
    scan_block(&block, &mut out);
    out
}

fn scan_block(block: &[(usize, &str)], out: &mut Vec<(usize, String)>) {
    if block.is_empty() {
        return;
    }
    let mut text = String::new();
    let mut starts = Vec::new();
    for (number, line) in block {
        // A reference definition: `[name]: target`.
        let t = line.trim_start();
        if let (Some(rest), false) = (t.strip_prefix('['), t.starts_with("[^")) {
            if let Some((label, target)) = rest.split_once("]:") {
                if !label.is_empty() && !label.contains(']') {
                    let target = target.split_whitespace().next().unwrap_or("");
                    out.push((*number, target.trim_matches(['<', '>']).to_string()));
                }
            }
        }
        starts.push((text.len(), *number));
        text.push_str(line);
        text.push('\n');
    }
    let line_of = |at: usize| starts[starts.partition_point(|&(s, _)| s <= at) - 1].1;
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'`' => i = skip_code_span(b, i),
            b'[' => {
                if let Some(close) = closing_bracket(b, i) {
                    if b.get(close + 1) == Some(&b'(') {
                        if let Some((target, _)) = destination(b, close + 1) {
                            out.push((line_of(i), target));
                        }
                    }
                }
                // The link's text may hold a link (an image in a link): scan it too.
                i += 1;
            }
            _ => i += 1,
        }
    }
}

/// `path` with `.` and `..` resolved without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What is wrong with the link `target` of the file `from`, if anything.
fn check_link(
    from: &Path,
    target: &str,
    cache: &mut BTreeMap<PathBuf, BTreeSet<String>>,
) -> Option<String> {
    if target.starts_with("http://")
        || target.starts_with("https://")
        || target.starts_with("mailto:")
    {
        return None;
    }
    if target.is_empty() {
        return Some("the link has no target".into());
    }
    let (path, fragment) = match target.split_once('#') {
        Some((p, f)) => (p, Some(f)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        from.to_path_buf()
    } else {
        normalize(&from.parent().unwrap_or(Path::new("")).join(path))
    };
    if !file.starts_with(root()) {
        return Some(format!("`{}` lies outside the repository", shown(&file)));
    }
    if !file.exists() {
        return Some(format!("`{}` does not exist", shown(&file)));
    }
    let fragment = fragment?;
    if file.extension().and_then(|e| e.to_str()) != Some("md") {
        return Some(format!(
            "`#{fragment}` points into `{}`, which is not Markdown",
            shown(&file)
        ));
    }
    let known = cache
        .entry(file.clone())
        .or_insert_with(|| anchors(&fs::read_to_string(&file).unwrap_or_default()));
    if known.contains(fragment) {
        None
    } else {
        Some(format!(
            "`{}` has no heading whose anchor is `#{fragment}`",
            shown(&file)
        ))
    }
}

/// Every Markdown file under `dir`, recursively, sorted.
fn markdown_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().and_then(|e| e.to_str()) == Some("md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn shown(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn book_summary_lists_every_chapter_and_only_chapters_that_exist() {
    let src = book_src();
    let summary = src.join("SUMMARY.md");
    let mut failures = Vec::new();
    let mut listed = BTreeSet::new();
    for (line, target) in links(&read(&summary)) {
        if target.is_empty() {
            continue; // a draft chapter: mdBook's `- [Title]()`
        }
        let path = normalize(&src.join(target.split('#').next().unwrap_or("")));
        if !path.is_file() {
            failures.push(format!(
                "book/src/SUMMARY.md:{line}: `{target}` is not a file"
            ));
        }
        if !listed.insert(path) {
            failures.push(format!(
                "book/src/SUMMARY.md:{line}: `{target}` is listed twice"
            ));
        }
    }
    for file in markdown_files(&src) {
        if file != summary && !listed.contains(&file) {
            failures.push(format!(
                "{}: not listed in book/src/SUMMARY.md",
                shown(&file)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "the book's summary:\n{}",
        failures.join("\n")
    );
}

#[test]
fn book_and_readme_links_resolve() {
    let mut files = vec![root().join("README.md")];
    files.extend(markdown_files(&book_src()));
    let mut cache = BTreeMap::new();
    let mut failures = Vec::new();
    let mut count = 0;
    for file in &files {
        for (line, target) in links(&read(file)) {
            count += 1;
            if let Some(why) = check_link(file, &target, &mut cache) {
                failures.push(format!("{}:{line}: link `{target}`: {why}", shown(file)));
            }
        }
    }
    assert!(count > 0, "no links found: the scanner is broken");
    assert!(
        failures.is_empty(),
        "broken links:\n{}",
        failures.join("\n")
    );
}

#[test]
fn book_anchors_are_made_as_github_and_mdbook_make_them() {
    assert_eq!(anchor("The tuner"), "the-tuner");
    assert_eq!(
        anchor("From an ONNX model: `cargo kfoundry import`"),
        "from-an-onnx-model-cargo-kfoundry-import"
    );
    assert_eq!(
        anchor("Reliability: what is guaranteed and how it is tested"),
        "reliability-what-is-guaranteed-and-how-it-is-tested"
    );
    assert_eq!(
        anchor("Source-level evolution with a language model (optional)"),
        "source-level-evolution-with-a-language-model-optional"
    );
    assert_eq!(
        anchor("Inputs, edge values and what a proof varies"),
        "inputs-edge-values-and-what-a-proof-varies"
    );
    assert_eq!(
        anchor("snake_case and `a.b` [linked](x.md#y)"),
        "snake_case-and-ab-linked"
    );
    assert_eq!(
        atx_heading("## Size ranges: a portfolio ##"),
        Some("Size ranges: a portfolio")
    );
    assert_eq!(atx_heading("#hashtag"), None);
    let text = "# A\n\n```toml\n# not a heading\n```\n\n## A\n\nB\n---\n";
    let found: Vec<_> = anchors(text).into_iter().collect();
    assert_eq!(found, ["a", "a-1", "b"]);
}

#[test]
fn book_links_in_code_are_not_links() {
    let text = "[a](one.md) `[b](two.md)` \\[c](three.md)\n\
                ``x [d](four.md) `` and `span\ncontinued [e](five.md)` [f](six.md#g \"title\")\n\
                \n```md\n[h](seven.md)\n```\n  ~~~\n  [i](eight.md)\n  ~~~\n\
                ![j](nine.png) [![k](ten.png)](eleven.md)\n\n[ref]: twelve.md\n";
    let expected: Vec<(usize, String)> = [
        (1, "one.md"),
        (3, "six.md#g"),
        (11, "nine.png"),
        (11, "eleven.md"),
        (11, "ten.png"),
        (13, "twelve.md"),
    ]
    .into_iter()
    .map(|(l, t)| (l, t.to_string()))
    .collect();
    assert_eq!(links(text), expected);
}
