//! Which kernels a command's `--kernel` patterns select. A pattern selects a kernel when it is
//! the kernel's id (`pkg::Name`), its name alone (`Name` or `::Name`: `Sgemm` is not
//! `SuiteSgemm`), or a glob over the id (`cnn-block::*`, `*Softmax*`: `*`, `?`, `[abc]`).
//! Repeatable: a kernel is selected when any pattern selects it, and every pattern must select
//! one (a misspelled pattern is an error, never a tune of nothing or of everything).

use crate::error::usage;

/// The `--kernel` patterns of one command.
pub struct KernelFilter {
    patterns: Vec<(String, Option<glob::Pattern>)>,
}

impl KernelFilter {
    /// The patterns as given; an invalid glob is a usage error.
    pub fn new(patterns: &[String]) -> anyhow::Result<KernelFilter> {
        let patterns = patterns
            .iter()
            .map(|p| {
                let glob = p
                    .contains(['*', '?', '['])
                    .then(|| glob::Pattern::new(p))
                    .transpose();
                glob.map(|g| (p.clone(), g))
                    .map_err(|e| usage(format!("`--kernel {p}` is not a valid pattern: {e}")))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(KernelFilter { patterns })
    }

    /// Whether `id` is selected (every id, without patterns).
    fn selects(&self, id: &str) -> bool {
        self.patterns.is_empty() || self.patterns.iter().any(|p| matches(p, id))
    }

    /// The items of `items` (each known by `id`) selected; a usage error names a pattern that
    /// selects none of them.
    pub fn select<'a, T>(
        &self,
        items: &'a [T],
        id: impl Fn(&T) -> &str,
    ) -> anyhow::Result<Vec<&'a T>> {
        for p in &self.patterns {
            if !items.iter().any(|item| matches(p, id(item))) {
                let mut known: Vec<&str> = items.iter().map(&id).collect();
                known.sort_unstable();
                known.truncate(12);
                return Err(usage(format!(
                    "no annotated kernel matches `--kernel {}` (kernels: {})",
                    p.0,
                    known.join(", ")
                )));
            }
        }
        Ok(items.iter().filter(|item| self.selects(id(item))).collect())
    }
}

fn matches((text, glob): &(String, Option<glob::Pattern>), id: &str) -> bool {
    let name = id.rsplit("::").next().unwrap_or(id);
    match glob {
        Some(g) => g.matches(id),
        None => text == id || text == name || text.strip_prefix("::") == Some(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDS: [&str; 4] = [
        "kfoundry-examples::Sgemm",
        "kfoundry-examples::SuiteSgemm",
        "cnn-block::K00Conv",
        "cnn-block::K01Conv",
    ];

    fn picked(patterns: &[&str]) -> anyhow::Result<Vec<&'static str>> {
        let filter =
            KernelFilter::new(&patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>())?;
        Ok(filter.select(&IDS, |id| id)?.into_iter().copied().collect())
    }

    #[test]
    fn ids_names_and_globs() {
        assert_eq!(picked(&[]).unwrap(), IDS);
        assert_eq!(
            picked(&["Sgemm"]).unwrap(),
            ["kfoundry-examples::Sgemm"],
            "a name is exact, not a substring"
        );
        assert_eq!(picked(&["::Sgemm"]).unwrap(), ["kfoundry-examples::Sgemm"]);
        assert_eq!(
            picked(&["kfoundry-examples::SuiteSgemm"]).unwrap(),
            ["kfoundry-examples::SuiteSgemm"]
        );
        assert_eq!(
            picked(&["cnn-block::*"]).unwrap(),
            ["cnn-block::K00Conv", "cnn-block::K01Conv"]
        );
        assert_eq!(
            picked(&["*Sgemm", "cnn-block::K01Conv"]).unwrap(),
            [
                "kfoundry-examples::Sgemm",
                "kfoundry-examples::SuiteSgemm",
                "cnn-block::K01Conv"
            ]
        );
        let e = picked(&["Sgemm", "Sgem"]).unwrap_err().to_string();
        assert!(
            e.contains("no annotated kernel matches `--kernel Sgem`")
                && e.contains("kfoundry-examples::Sgemm"),
            "{e}"
        );
        assert!(
            picked(&["cnn-block::"]).is_err(),
            "a prefix is not a pattern: `cnn-block::*` is"
        );
        assert!(picked(&["[x"])
            .unwrap_err()
            .to_string()
            .contains("not a valid pattern"));
    }
}
