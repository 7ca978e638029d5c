//! Reads the argument list of an OpenCL C kernel from its source.
//!
//! Only the signature is parsed: comments and preprocessor lines are skipped, each
//! `__kernel`/`kernel` function is found and its parameters classified as global buffers,
//! constant buffers, local-memory buffers or scalars with their element types. Macros inside a
//! signature are not expanded: the signature must be plain OpenCL C.

use serde::{Deserialize, Serialize};

/// The scalar types a kernel argument (or a buffer element) may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScalarType {
    F32,
    F64,
    /// IEEE half precision: `__global half*` buffers (read and written with `vload_half` and
    /// `vstore_half`, or arithmetic under `cl_khr_fp16`); the host holds its bits as `u16`.
    F16,
    /// bfloat16, stored as `ushort` (OpenCL has no such type): a `ushort` buffer the annotation
    /// declares with `bf16(...)`; the host holds its bits as `u16`.
    Bf16,
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
}

impl ScalarType {
    /// The Rust type name (used by the macro to generate typed launchers).
    pub fn rust_name(self) -> &'static str {
        match self {
            ScalarType::F32 => "f32",
            ScalarType::F64 => "f64",
            ScalarType::F16 | ScalarType::Bf16 => "u16",
            ScalarType::I8 => "i8",
            ScalarType::U8 => "u8",
            ScalarType::I16 => "i16",
            ScalarType::U16 => "u16",
            ScalarType::I32 => "i32",
            ScalarType::U32 => "u32",
            ScalarType::I64 => "i64",
            ScalarType::U64 => "u64",
        }
    }

    /// The OpenCL C spelling.
    pub fn opencl_name(self) -> &'static str {
        match self {
            ScalarType::F32 => "float",
            ScalarType::F64 => "double",
            ScalarType::F16 => "half",
            ScalarType::Bf16 => "ushort",
            ScalarType::I8 => "char",
            ScalarType::U8 => "uchar",
            ScalarType::I16 => "short",
            ScalarType::U16 => "ushort",
            ScalarType::I32 => "int",
            ScalarType::U32 => "uint",
            ScalarType::I64 => "long",
            ScalarType::U64 => "ulong",
        }
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            ScalarType::F32 | ScalarType::F64 | ScalarType::F16 | ScalarType::Bf16
        )
    }

    /// The smallest and largest value of an integer type (`None` for floats).
    pub fn int_range(self) -> Option<(i128, i128)> {
        Some(match self {
            ScalarType::I8 => (i8::MIN.into(), i8::MAX.into()),
            ScalarType::U8 => (0, u8::MAX.into()),
            ScalarType::I16 => (i16::MIN.into(), i16::MAX.into()),
            ScalarType::U16 => (0, u16::MAX.into()),
            ScalarType::I32 => (i32::MIN.into(), i32::MAX.into()),
            ScalarType::U32 => (0, u32::MAX.into()),
            ScalarType::I64 => (i64::MIN.into(), i64::MAX.into()),
            ScalarType::U64 => (0, u64::MAX.into()),
            ScalarType::F32 | ScalarType::F64 | ScalarType::F16 | ScalarType::Bf16 => return None,
        })
    }

    /// A 16-bit float (`half`, or bfloat16 in a `ushort`).
    pub fn is_half(self) -> bool {
        matches!(self, ScalarType::F16 | ScalarType::Bf16)
    }

    /// Size in bytes.
    pub fn size(self) -> usize {
        match self {
            ScalarType::I8 | ScalarType::U8 => 1,
            ScalarType::I16 | ScalarType::U16 | ScalarType::F16 | ScalarType::Bf16 => 2,
            ScalarType::F32 | ScalarType::I32 | ScalarType::U32 => 4,
            ScalarType::F64 | ScalarType::I64 | ScalarType::U64 => 8,
        }
    }

    fn from_words(words: &[&str]) -> Option<ScalarType> {
        Some(match words {
            ["float"] => ScalarType::F32,
            ["double"] => ScalarType::F64,
            ["half"] => ScalarType::F16,
            ["char"] | ["signed", "char"] => ScalarType::I8,
            ["uchar"] | ["unsigned", "char"] => ScalarType::U8,
            ["short"] | ["signed", "short"] => ScalarType::I16,
            ["ushort"] | ["unsigned", "short"] => ScalarType::U16,
            ["int"] | ["signed", "int"] | ["signed"] => ScalarType::I32,
            ["uint"] | ["unsigned", "int"] | ["unsigned"] => ScalarType::U32,
            ["long"] | ["signed", "long"] => ScalarType::I64,
            ["ulong"] | ["unsigned", "long"] => ScalarType::U64,
            _ => return None,
        })
    }
}

/// Where a pointer argument points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AddressSpace {
    Global,
    Constant,
    Local,
}

/// One kernel argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum KernelArg {
    /// A pointer argument: a device buffer (global/constant) or local scratch memory.
    Buffer {
        name: String,
        space: AddressSpace,
        elem: ScalarType,
        /// Declared `const` (never written by the kernel).
        read_only: bool,
    },
    Scalar {
        name: String,
        ty: ScalarType,
    },
}

impl KernelArg {
    pub fn name(&self) -> &str {
        match self {
            KernelArg::Buffer { name, .. } | KernelArg::Scalar { name, .. } => name,
        }
    }
}

/// A `__kernel` function found in a source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelSignature {
    pub name: String,
    pub args: Vec<KernelArg>,
}

impl KernelSignature {
    /// The element type of pointer argument `name`; `None` when no pointer has that name.
    pub fn buffer_elem(&self, name: &str) -> Option<ScalarType> {
        self.args.iter().find_map(|a| match a {
            KernelArg::Buffer { name: n, elem, .. } if n == name => Some(*elem),
            _ => None,
        })
    }
}

/// Why a signature could not be read; `line` is 1-based within the source, 0 when the
/// problem is not at one place (a kernel that is missing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for SignatureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            0 => f.write_str(&self.message),
            line => write!(f, "line {line}: {}", self.message),
        }
    }
}

impl std::error::Error for SignatureError {}

/// Finds every kernel in `source`.
pub fn kernels(source: &str) -> Result<Vec<KernelSignature>, SignatureError> {
    let clean = strip_comments_and_directives(source);
    let line_of = |offset: usize| clean[..offset.min(clean.len())].matches('\n').count() + 1;
    let mut found = Vec::new();
    let mut search_from = 0;
    while let Some((kw_start, kw_end)) = find_kernel_keyword(&clean, search_from) {
        let open = parameter_list_start(&clean, kw_end).ok_or_else(|| SignatureError {
            line: line_of(kw_start),
            message: "`__kernel` without a parameter list".into(),
        })?;
        let head = clean[kw_end..open].rsplit("))").next().unwrap_or("");
        let name = head
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .rfind(|w| !w.is_empty())
            .unwrap_or("")
            .to_string();
        let close = matching_paren(&clean, open).ok_or_else(|| SignatureError {
            line: line_of(open),
            message: format!("unclosed parameter list of kernel `{name}`"),
        })?;
        // The return type may come before or after `__attribute__((...))`.
        if !clean[kw_end..open]
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| w == "void")
        {
            return Err(SignatureError {
                line: line_of(kw_start),
                message: format!("kernel `{name}` must return `void`"),
            });
        }
        let params = &clean[open + 1..close];
        let args = parse_params(params, open + 1, &line_of, &name)?;
        found.push(KernelSignature { name, args });
        search_from = close;
    }
    Ok(found)
}

/// Finds the kernel `entry`, or the only kernel when `entry` is `None`.
pub fn find_kernel(source: &str, entry: Option<&str>) -> Result<KernelSignature, SignatureError> {
    let all = kernels(source)?;
    let names = || {
        all.iter()
            .map(|k| k.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match entry {
        Some(entry) => all
            .iter()
            .find(|k| k.name == entry)
            .cloned()
            .ok_or_else(|| SignatureError {
                line: 0,
                message: if all.is_empty() {
                    format!("no `__kernel` function in the source (looked for `{entry}`)")
                } else {
                    format!(
                        "no kernel named `{entry}` in the source (found: {})",
                        names()
                    )
                },
            }),
        None => match all.len() {
            1 => Ok(all[0].clone()),
            0 => Err(SignatureError {
                line: 0,
                message: "no `__kernel` function in the source".into(),
            }),
            _ => Err(SignatureError {
                line: 0,
                message: format!(
                    "the source has several kernels ({}); name one with `kernel = \"...\"`",
                    names()
                ),
            }),
        },
    }
}

fn find_kernel_keyword(text: &str, from: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut i = from;
    while i < text.len() {
        let rest = &text[i..];
        for kw in ["__kernel", "kernel"] {
            if rest.starts_with(kw) {
                let before_ok = i == 0 || !is_ident_byte(bytes[i - 1]);
                let after = i + kw.len();
                let after_ok = after >= bytes.len() || !is_ident_byte(bytes[after]);
                if before_ok && after_ok {
                    return Some((i, after));
                }
            }
        }
        i += rest.chars().next().map_or(1, char::len_utf8);
    }
    None
}

/// The `(` opening the parameter list after `__kernel`, skipping `__attribute__((...))`.
fn parameter_list_start(text: &str, mut from: usize) -> Option<usize> {
    loop {
        let open = from + text[from..].find('(')?;
        let head = text[from..open].trim_end();
        if head.ends_with("__attribute__") || head.ends_with("__attribute") {
            from = matching_paren(text, open)? + 1;
            continue;
        }
        return Some(open);
    }
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn matching_paren(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Replaces comments and preprocessor lines by spaces, keeping offsets and newlines.
fn strip_comments_and_directives(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.char_indices().peekable();
    let mut at_line_start = true;
    let mut in_directive = false;
    while let Some((_, c)) = chars.next() {
        let next = chars.peek().map(|(_, n)| *n);
        if in_directive {
            if c == '\\' && next == Some('\n') {
                out.push(' ');
                out.push('\n');
                chars.next();
                continue;
            }
            if c == '\n' {
                in_directive = false;
                at_line_start = true;
                out.push('\n');
            } else {
                out.push(if c.is_ascii() { ' ' } else { c });
            }
            continue;
        }
        match (c, next) {
            ('/', Some('/')) => {
                out.push(' ');
                for (_, c2) in chars.by_ref() {
                    if c2 == '\n' {
                        out.push('\n');
                        break;
                    }
                    out.push(if c2.is_ascii() { ' ' } else { c2 });
                }
                at_line_start = true;
            }
            ('/', Some('*')) => {
                chars.next();
                out.push_str("  ");
                let mut prev = ' ';
                for (_, c2) in chars.by_ref() {
                    out.push(if c2 == '\n' {
                        '\n'
                    } else if c2.is_ascii() {
                        ' '
                    } else {
                        c2
                    });
                    if prev == '*' && c2 == '/' {
                        break;
                    }
                    prev = c2;
                }
            }
            ('#', _) if at_line_start => {
                in_directive = true;
                out.push(' ');
            }
            _ => {
                if c == '\n' {
                    at_line_start = true;
                } else if !c.is_whitespace() {
                    at_line_start = false;
                }
                out.push(c);
            }
        }
    }
    out
}

fn parse_params(
    params: &str,
    base: usize,
    line_of: &dyn Fn(usize) -> usize,
    kernel: &str,
) -> Result<Vec<KernelArg>, SignatureError> {
    let mut args = Vec::new();
    if params.trim().is_empty() || params.trim() == "void" {
        return Ok(args);
    }
    let mut offset = base;
    for raw in params.split(',') {
        let line = line_of(offset + raw.len() - raw.trim_start().len());
        offset += raw.len() + 1;
        let err = |message: String| SignatureError {
            line,
            message: format!("kernel `{kernel}`: {message}"),
        };
        let spaced = raw.replace('*', " * ");
        let words: Vec<&str> = spaced.split_whitespace().collect();
        if words.is_empty() {
            return Err(err("empty parameter".into()));
        }
        if raw.contains('[') {
            return Err(err(format!(
                "array parameter `{}` is not supported; use a pointer",
                raw.trim()
            )));
        }
        let name = *words.last().unwrap_or(&"");
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            || name.chars().next().is_none_or(|c| c.is_ascii_digit())
            || name == "*"
        {
            return Err(err(format!("parameter `{}` has no name", raw.trim())));
        }
        let mut space = None;
        let mut is_const = false;
        let mut pointers = 0;
        let mut type_words = Vec::new();
        for w in &words[..words.len() - 1] {
            match *w {
                "__global" | "global" => space = Some(AddressSpace::Global),
                "__constant" | "constant" => space = Some(AddressSpace::Constant),
                "__local" | "local" => space = Some(AddressSpace::Local),
                "__private" | "private" => {}
                // `const float*` (the elements are read-only) but not `float* const` (only
                // the pointer is).
                "const" if pointers == 0 => is_const = true,
                "const" => {}
                "restrict" | "__restrict" | "__restrict__" | "volatile" | "__read_only"
                | "read_only" | "__write_only" | "write_only" => {}
                "*" => pointers += 1,
                other => type_words.push(other),
            }
        }
        let ty = ScalarType::from_words(&type_words).ok_or_else(|| {
            let ty = type_words.join(" ");
            let hint = if ty.chars().last().is_some_and(|c| c.is_ascii_digit()) {
                " (vector element types are not supported yet: pass a scalar pointer and use vloadN/vstoreN)"
            } else {
                ""
            };
            err(format!("unsupported type `{ty}` of parameter `{name}`{hint}"))
        })?;
        let arg = match (pointers, space) {
            (0, None) if ty == ScalarType::F16 => {
                return Err(err(format!("`half` parameter `{name}` by value is not supported: pass a `float` (a `half*` buffer is)")))
            }
            (0, None) => KernelArg::Scalar { name: name.to_string(), ty },
            (0, Some(_)) => return Err(err(format!("address-space qualifier on non-pointer `{name}`"))),
            (1, None) => return Err(err(format!("pointer `{name}` needs an address space (`__global`, `__constant` or `__local`)"))),
            (1, Some(space)) => KernelArg::Buffer { name: name.to_string(), space, elem: ty, read_only: is_const || space == AddressSpace::Constant },
            _ => return Err(err(format!("pointer-to-pointer parameter `{name}` is not supported"))),
        };
        if args.iter().any(|a: &KernelArg| a.name() == arg.name()) {
            return Err(err(format!("duplicate parameter name `{name}`")));
        }
        args.push(arg);
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAXPY: &str = r#"
// y = a*x + y
#define STEP (VEC * ITEMS)
#if VEC > 1
  // something
#endif
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void saxpy(const int n, const float a,
           __global const float* restrict x, /* input */
           __global float *y,
           __local float* scratch)
{
    y[get_global_id(0)] += a * x[get_global_id(0)];
}
"#;

    #[test]
    fn reads_saxpy() {
        let k = find_kernel(SAXPY, None).unwrap();
        assert_eq!(k.name, "saxpy");
        assert_eq!(
            k.args,
            vec![
                KernelArg::Scalar {
                    name: "n".into(),
                    ty: ScalarType::I32
                },
                KernelArg::Scalar {
                    name: "a".into(),
                    ty: ScalarType::F32
                },
                KernelArg::Buffer {
                    name: "x".into(),
                    space: AddressSpace::Global,
                    elem: ScalarType::F32,
                    read_only: true
                },
                KernelArg::Buffer {
                    name: "y".into(),
                    space: AddressSpace::Global,
                    elem: ScalarType::F32,
                    read_only: false
                },
                KernelArg::Buffer {
                    name: "scratch".into(),
                    space: AddressSpace::Local,
                    elem: ScalarType::F32,
                    read_only: false
                },
            ]
        );
    }

    #[test]
    fn attribute_after_the_return_type_and_const_pointers() {
        let src = "__kernel void __attribute__((reqd_work_group_size(64, 1, 1))) k(__global const float* x, __global float* const y) {}";
        let k = find_kernel(src, None).unwrap();
        assert_eq!(k.name, "k");
        assert_eq!(
            k.args,
            vec![
                KernelArg::Buffer {
                    name: "x".into(),
                    space: AddressSpace::Global,
                    elem: ScalarType::F32,
                    read_only: true
                },
                KernelArg::Buffer {
                    name: "y".into(),
                    space: AddressSpace::Global,
                    elem: ScalarType::F32,
                    read_only: false
                },
            ]
        );
    }

    #[test]
    fn several_kernels_need_a_name() {
        let src = "kernel void a(global uint* p) {} \n kernel void b(constant double* q, unsigned int m) {}";
        let err = find_kernel(src, None).unwrap_err();
        assert!(err.message.contains("several kernels (a, b)"), "{err}");
        let b = find_kernel(src, Some("b")).unwrap();
        assert_eq!(
            b.args,
            vec![
                KernelArg::Buffer {
                    name: "q".into(),
                    space: AddressSpace::Constant,
                    elem: ScalarType::F64,
                    read_only: true
                },
                KernelArg::Scalar {
                    name: "m".into(),
                    ty: ScalarType::U32
                },
            ]
        );
        let err = find_kernel(src, Some("c")).unwrap_err();
        assert!(err.message.contains("no kernel named `c`"), "{err}");
    }

    #[test]
    fn kernel_in_comment_or_identifier_is_ignored() {
        let src = "/* __kernel void fake(int x) */ int kernel_helper(int k) { return k; }\n__kernel void real(__global float* out) {}";
        let all = kernels(src).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].name, "real");
    }

    #[test]
    fn errors_name_the_line() {
        let src = "\n\n__kernel void k(__global float4* v) {}";
        let err = find_kernel(src, None).unwrap_err();
        assert_eq!(err.line, 3);
        assert!(err.message.contains("vector element types"), "{err}");
        let err = find_kernel("__kernel void k(float* v) {}", None).unwrap_err();
        assert!(err.message.contains("needs an address space"), "{err}");
        let err = find_kernel("__kernel void k(__global float** v) {}", None).unwrap_err();
        assert!(err.message.contains("pointer-to-pointer"), "{err}");
        let err = find_kernel("__kernel void k(int a, int a) {}", None).unwrap_err();
        assert!(err.message.contains("duplicate"), "{err}");
        let err = find_kernel("__kernel void k(int a", None).unwrap_err();
        assert!(err.message.contains("unclosed"), "{err}");
        let err = find_kernel("int f(int a) { return a; }", None).unwrap_err();
        assert!(err.message.contains("no `__kernel`"), "{err}");
        let err = find_kernel("__kernel void k(__global float* x, int) {}", None).unwrap_err();
        assert!(
            err.message.contains("unsupported type") || err.message.contains("no name"),
            "{err}"
        );
    }

    #[test]
    fn empty_parameter_list() {
        let k = find_kernel("__kernel void k(void) {}", None).unwrap();
        assert!(k.args.is_empty());
    }
}
