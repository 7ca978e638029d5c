//! The tunable parameters a generated source declares (`// kfoundry-params: TS=[8,16,32]`):
//! besides the annotation's, the only names that may reach the build options of that source.

use super::spec::{check_macro_name, Param};

/// The marker of a parameter declaration line in a generated source:
/// `// kfoundry-params: TS=[8,16,32], WPT=[1,2]`.
pub const PARAMS_MARKER: &str = "kfoundry-params:";
/// Most parameters one source may declare, and values per parameter.
pub const MAX_DECLARED_PARAMS: usize = 8;
pub const MAX_DECLARED_VALUES: usize = 16;

/// A malformed `kfoundry-params` declaration: the 1-based line and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclarationError {
    pub line: usize,
    pub problem: String,
}

/// Reads the `// kfoundry-params:` lines of a generated source: the parameters it adds (or
/// whose values it redefines), each passed as `-D NAME=value` like the annotation's own.
pub fn declared_params(source: &str) -> Result<Vec<Param>, DeclarationError> {
    let mut params: Vec<Param> = Vec::new();
    for (i, line) in source.lines().enumerate() {
        let Some(pos) = line.find(PARAMS_MARKER) else {
            continue;
        };
        let bad = |problem: String| DeclarationError {
            line: i + 1,
            problem,
        };
        if !line[..pos].trim_end().ends_with("//") {
            return Err(bad("the declaration must be a `//` comment".into()));
        }
        let mut rest = line[pos + PARAMS_MARKER.len()..].trim();
        while !rest.is_empty() {
            let eq = rest
                .find('=')
                .ok_or_else(|| bad(format!("`{rest}` has no `=`")))?;
            let name = rest[..eq].trim();
            if let Err(why) = check_macro_name(name) {
                return Err(bad(format!("`{name}` is not a parameter name: it {why}")));
            }
            let after = rest[eq + 1..].trim_start();
            let list = after
                .strip_prefix('[')
                .ok_or_else(|| bad(format!("`{name}` needs a list `[…]`")))?;
            let close = list
                .find(']')
                .ok_or_else(|| bad(format!("the list of `{name}` is not closed")))?;
            let inner = list[..close].trim();
            let values = inner
                .split(',')
                .filter(|_| !inner.is_empty())
                .map(|v| {
                    v.trim()
                        .parse::<i64>()
                        .map_err(|_| bad(format!("`{}` (in `{name}`) is not an integer", v.trim())))
                })
                .collect::<Result<Vec<_>, _>>()?;
            if values.is_empty() || values.len() > MAX_DECLARED_VALUES {
                return Err(bad(format!(
                    "`{name}` needs 1 to {MAX_DECLARED_VALUES} values"
                )));
            }
            if params.iter().any(|p| p.name == name) {
                return Err(bad(format!("`{name}` is declared twice")));
            }
            params.push(Param {
                name: name.to_string(),
                values,
            });
            if params.len() > MAX_DECLARED_PARAMS {
                return Err(bad(format!("more than {MAX_DECLARED_PARAMS} parameters")));
            }
            rest = list[close + 1..]
                .trim_start()
                .trim_start_matches(',')
                .trim_start();
        }
    }
    Ok(params)
}
