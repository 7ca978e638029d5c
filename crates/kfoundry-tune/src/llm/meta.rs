//! Meta-prompt evolution: a population of prompt variants that evolves with the kernels.
//!
//! A [`PromptVariant`] is a set of [`Sections`] (optimisation philosophy, strategies,
//! pitfalls, analysis guidance) with a fitness (the best score of the kernels it produced,
//! e.g. reference time / time) and a use count. [`Population::select`] picks a variant by a
//! softmax over fitness, except for an exploration share spent on variants tried fewer than
//! `min_uses` times. Every `meta_every` samples [`Population::meta_request`] builds a request
//! asking the model to rewrite the sections of a good variant (improve what looks weak,
//! specialise or generalise what works), [`Sections::parse`] reads the answer and
//! [`Population::insert`] adds it unless it duplicates (exactly or nearly) a variant already
//! there; the population is bounded, the weakest tried variant leaving first. The population
//! is `Serialize`/`Deserialize`: it is part of the resumable tuner state.

use std::collections::BTreeSet;

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::chat::Message;

/// Longest section accepted from a meta-answer, in characters.
pub(crate) const MAX_SECTION_CHARS: usize = 2500;
/// Word-set similarity (Jaccard) at or above which two variants are duplicates.
pub(crate) const NEAR_DUPLICATE: f64 = 0.9;

/// The evolvable parts of a mutation prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sections {
    pub philosophy: String,
    pub strategies: String,
    pub pitfalls: String,
    pub analysis: String,
}

const HEADINGS: [&str; 4] = [
    "Optimisation philosophy",
    "Strategies",
    "Pitfalls",
    "Analysis guidance",
];

impl Sections {
    /// The sections as Markdown, one `##` heading each (the form [`Sections::parse`] reads).
    pub fn render(&self) -> String {
        let bodies = [
            &self.philosophy,
            &self.strategies,
            &self.pitfalls,
            &self.analysis,
        ];
        HEADINGS
            .iter()
            .zip(bodies)
            .map(|(h, b)| format!("## {h}\n{}", b.trim()))
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// Reads the four sections from a model's answer: Markdown headings containing
    /// "philosophy", "strateg", "pitfall" and "analysis" (any level, any case), each followed
    /// by its text; code fences and text outside the sections are ignored.
    pub fn parse(answer: &str) -> Result<Sections, MetaError> {
        let mut bodies: [Option<String>; 4] = [None, None, None, None];
        let mut current: Option<usize> = None;
        for line in answer.lines() {
            let trimmed = line.trim();
            if trimmed.starts_with("```") {
                continue;
            }
            let heading = trimmed.starts_with('#')
                || (trimmed.starts_with("**") && trimmed.ends_with("**") && trimmed.len() > 4);
            if heading {
                let lower = trimmed.to_lowercase();
                current = ["philosophy", "strateg", "pitfall", "analysis"]
                    .iter()
                    .position(|k| lower.contains(k));
                if let Some(i) = current {
                    if bodies[i].is_some() {
                        return Err(MetaError::Malformed {
                            problem: format!("the section `{}` appears twice", HEADINGS[i]),
                        });
                    }
                    bodies[i] = Some(String::new());
                }
                continue;
            }
            if let Some(body) = current.and_then(|i| bodies[i].as_mut()) {
                body.push_str(line);
                body.push('\n');
            }
        }
        let mut texts = Vec::with_capacity(4);
        for (i, body) in bodies.into_iter().enumerate() {
            let text = body.map(|b| b.trim().to_string()).unwrap_or_default();
            if text.is_empty() {
                return Err(MetaError::Malformed {
                    problem: format!("the section `{}` is missing or empty", HEADINGS[i]),
                });
            }
            let chars = text.chars().count();
            if chars > MAX_SECTION_CHARS {
                return Err(MetaError::TooLong {
                    section: HEADINGS[i],
                    chars,
                    max: MAX_SECTION_CHARS,
                });
            }
            texts.push(text);
        }
        let mut it = texts.into_iter();
        let mut next = || it.next().unwrap_or_default();
        Ok(Sections {
            philosophy: next(),
            strategies: next(),
            pitfalls: next(),
            analysis: next(),
        })
    }

    fn word_set(&self) -> BTreeSet<String> {
        self.render()
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// Jaccard similarity of the two variants' word sets (1 = the same words).
    pub fn similarity(&self, other: &Sections) -> f64 {
        let (a, b) = (self.word_set(), other.word_set());
        let union = a.union(&b).count();
        if union == 0 {
            return 1.0;
        }
        a.intersection(&b).count() as f64 / union as f64
    }
}

/// Why a meta-answer was not added.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetaError {
    #[error(
        "meta-prompt answer: {problem} (expected the four sections {HEADINGS:?} as `##` headings)"
    )]
    Malformed { problem: String },
    #[error("meta-prompt answer: the section `{section}` has {chars} characters, more than {max}")]
    TooLong {
        section: &'static str,
        chars: usize,
        max: usize,
    },
    #[error("meta-prompt answer duplicates prompt variant {of} (similarity {similarity:.2})")]
    Duplicate { of: usize, similarity: f64 },
}

/// Three starting points: a balanced one, a memory-first one, a parallelism-first one.
pub(crate) fn seed_sections() -> Vec<Sections> {
    vec![
        Sections {
            philosophy: "Find the bottleneck first (memory bandwidth, latency or arithmetic), then make the smallest change that removes it. Correctness comes before speed: a fast wrong kernel is worthless.".into(),
            strategies: "- Coalesce global accesses: consecutive work-items touch consecutive addresses.\n- Use vector types (float4, vload4/vstore4) where the data layout allows.\n- Reuse data through __local memory tiles synchronised with barrier().\n- Let each work-item compute several outputs to amortise index arithmetic.\n- Unroll short fixed-count loops.".into(),
            pitfalls: "- Every barrier() must be reached by all work-items of the group: never inside a divergent branch.\n- Guard the tail: sizes need not be multiples of the tile or vector width unless the launch guarantees it.\n- Stay within the device's local memory and work-group size.\n- Do not change the signature or the work each launch covers.".into(),
            analysis: "Compare the measured time with the reference and the roofline fraction: far below the bound means latency or poor access patterns; near it, only reducing traffic helps. Read the recent failures and avoid repeating them.".into(),
        },
        Sections {
            philosophy: "Memory traffic decides the speed of most kernels: every byte not loaded twice is time saved. Optimise the data path before the arithmetic.".into(),
            strategies: "- Stage reused inputs in __local memory tiles, loaded cooperatively and coalesced.\n- Keep partial results in registers (private arrays) and write each output once.\n- Widen loads with vloadN and vector types; align tile sizes to the preferred work-group multiple.\n- Pad local arrays by one element per row to avoid bank conflicts.".into(),
            pitfalls: "- A barrier is needed both after filling a tile and before overwriting it.\n- Large private arrays spill to slow memory; keep register blocks small (4–8 values).\n- Local memory per work-group is limited; make tile sizes tunable parameters instead of guessing.".into(),
            analysis: "Estimate the bytes moved per output before and after the change. If the kernel already reaches a high roofline fraction, prefer reducing the bytes (reuse, fusion) over reordering them.".into(),
        },
        Sections {
            philosophy: "Keep every compute unit busy: enough work-groups, enough work per work-item, little synchronisation. Match the work decomposition to the device's preferred work-group multiple and sub-groups.".into(),
            strategies: "- Use sub-group functions (sub_group_reduce_add, shuffles) where the device supports them, instead of local-memory round trips.\n- Reduce within a work-group hierarchically: registers, then sub-group, then local memory.\n- Make per-work-item work and work-group size tunable with `// kfoundry-params:` declarations.\n- Remove redundant barriers and divergent branches.".into(),
            pitfalls: "- Sub-group sizes differ between devices: never hard-code one, query get_sub_group_size().\n- Without sub-group support, do not call sub_group_* functions at all.\n- Atomics on global memory serialise; use them once per work-group at most.".into(),
            analysis: "Look at the compute units and the work-group size: too few groups leave units idle, too many small ones waste scheduling. Relate the measured time to the occupancy this implies.".into(),
        },
    ]
}

/// One prompt variant of the population.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptVariant {
    /// Stable across insertions and evictions (never reused).
    pub id: usize,
    pub sections: Sections,
    /// The best score of the kernels it produced; `None` until one was accepted.
    pub fitness: Option<f64>,
    /// How many times it was selected.
    pub uses: u32,
    /// How many of its kernels were accepted.
    pub accepted: u32,
    /// The variant it was rewritten from (`None` for seeds).
    pub parent: Option<usize>,
}

/// How variants are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// Softmax temperature over fitness (score units).
    pub temperature: f64,
    /// Share of selections spent on rarely used variants.
    pub exploration: f64,
    /// Below this many uses a variant is "rarely used".
    pub min_uses: u32,
}

impl Default for Selection {
    fn default() -> Self {
        Selection {
            temperature: 0.5,
            exploration: 0.2,
            min_uses: 3,
        }
    }
}

/// A meta-request: the messages to send, and the variant being rewritten.
#[derive(Debug, Clone, PartialEq)]
pub struct MetaRequest {
    pub parent: usize,
    pub messages: Vec<Message>,
}

/// The prompt variants and the meta-request schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Population {
    variants: Vec<PromptVariant>,
    next_id: usize,
    max_size: usize,
    meta_every: u32,
    samples_since_meta: u32,
    pub selection: Selection,
}

impl Population {
    /// The seed variants; at most `max_size` variants (at least 2); a meta-request every
    /// `meta_every` samples (0: never).
    pub fn seeded(max_size: usize, meta_every: u32) -> Population {
        let max_size = max_size.max(2);
        let variants: Vec<PromptVariant> = seed_sections()
            .into_iter()
            .take(max_size)
            .enumerate()
            .map(|(id, sections)| PromptVariant {
                id,
                sections,
                fitness: None,
                uses: 0,
                accepted: 0,
                parent: None,
            })
            .collect();
        Population {
            next_id: variants.len(),
            variants,
            max_size,
            meta_every,
            samples_since_meta: 0,
            selection: Selection::default(),
        }
    }

    pub fn variants(&self) -> &[PromptVariant] {
        &self.variants
    }

    /// A population read back from a checkpoint: its size limit and meta-request period are
    /// the current configuration's, and it must still hold a variant to sample from.
    pub fn restored(mut self, max_size: usize, meta_every: u32) -> Result<Population, String> {
        if self.variants.is_empty() {
            return Err("the prompt population is empty".into());
        }
        let selection = &self.selection;
        if !(selection.temperature.is_finite() && (0.0..=1.0).contains(&selection.exploration)) {
            return Err("the prompt selection settings are out of range".into());
        }
        self.max_size = max_size.max(2);
        self.meta_every = meta_every;
        self.next_id = self.next_id.max(
            self.variants
                .iter()
                .map(|v| v.id.saturating_add(1))
                .max()
                .unwrap_or(0),
        );
        Ok(self)
    }

    pub fn get(&self, id: usize) -> Option<&PromptVariant> {
        self.variants.iter().find(|v| v.id == id)
    }

    fn score(v: &PromptVariant) -> f64 {
        v.fitness.unwrap_or(0.0)
    }

    /// The variant with the highest fitness (ties: the older).
    pub fn best(&self) -> Option<&PromptVariant> {
        self.variants
            .iter()
            .fold(None, |best: Option<&PromptVariant>, v| match best {
                Some(b) if Self::score(b) >= Self::score(v) => Some(b),
                _ => Some(v),
            })
    }

    fn softmax_pick<R: Rng>(candidates: &[&PromptVariant], temperature: f64, rng: &mut R) -> usize {
        let max = candidates
            .iter()
            .map(|v| Self::score(v))
            .fold(f64::NEG_INFINITY, f64::max);
        let t = temperature.max(1e-6);
        let weights: Vec<f64> = candidates
            .iter()
            .map(|v| ((Self::score(v) - max) / t).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        let mut x = rng.gen::<f64>() * total;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        candidates.len() - 1
    }

    /// Picks the variant for the next mutation prompt, counts its use and the sample, and
    /// returns its id.
    pub fn select<R: Rng>(&mut self, rng: &mut R) -> usize {
        let rare: Vec<usize> = (0..self.variants.len())
            .filter(|&i| self.variants[i].uses < self.selection.min_uses)
            .collect();
        let index = if !rare.is_empty() && rng.gen::<f64>() < self.selection.exploration {
            rare[rng.gen_range(0..rare.len())]
        } else {
            let all: Vec<&PromptVariant> = self.variants.iter().collect();
            Self::softmax_pick(&all, self.selection.temperature, rng)
        };
        let v = &mut self.variants[index];
        v.uses = v.uses.saturating_add(1);
        self.samples_since_meta = self.samples_since_meta.saturating_add(1);
        v.id
    }

    /// Records the score of an accepted kernel produced with variant `id` (higher is better);
    /// unknown ids (evicted since) are ignored.
    pub fn record_score(&mut self, id: usize, score: f64) {
        if !score.is_finite() {
            return;
        }
        if let Some(v) = self.variants.iter_mut().find(|v| v.id == id) {
            v.accepted = v.accepted.saturating_add(1);
            v.fitness = Some(v.fitness.map_or(score, |f| f.max(score)));
        }
    }

    /// Whether a meta-request is due.
    pub fn meta_due(&self) -> bool {
        self.meta_every > 0 && self.samples_since_meta >= self.meta_every
    }

    /// Restarts the count towards the next meta-request (called whether or not it worked,
    /// so that a failing endpoint is not asked again at every sample).
    pub fn meta_done(&mut self) {
        self.samples_since_meta = 0;
    }

    /// The request that rewrites a good variant: chosen by softmax over fitness, shown with
    /// its record, the population's scores and the weakest tried variant as a contrast.
    /// `context` says what is being tuned (kernel, device), for specialisation.
    pub fn meta_request<R: Rng>(&self, context: &str, rng: &mut R) -> Option<MetaRequest> {
        let all: Vec<&PromptVariant> = self.variants.iter().collect();
        if all.is_empty() {
            return None;
        }
        let parent = all[Self::softmax_pick(&all, self.selection.temperature, rng)];
        let fmt_fit = |v: &PromptVariant| {
            v.fitness.map_or("no accepted kernel yet".to_string(), |f| {
                format!("best score {f:.3}")
            })
        };
        let mut user = format!(
            "We are tuning {context}. Prompts like the one below guide a model that rewrites OpenCL kernels; each prompt's score is the best speed-up over the reference of the correct kernels it produced.\n\n\
             Scores of the current prompts:\n"
        );
        for v in &self.variants {
            user.push_str(&format!(
                "- prompt {}: {}, used {} times, {} kernels accepted\n",
                v.id,
                fmt_fit(v),
                v.uses,
                v.accepted
            ));
        }
        user.push_str(&format!(
            "\n# Prompt {} ({}, used {} times)\n{}\n",
            parent.id,
            fmt_fit(parent),
            parent.uses,
            parent.sections.render()
        ));
        let weakest = self
            .variants
            .iter()
            .filter(|v| v.id != parent.id && v.uses >= self.selection.min_uses)
            .min_by(|a, b| Self::score(a).total_cmp(&Self::score(b)));
        if let Some(w) = weakest {
            user.push_str(&format!(
                "\n# For contrast, the weakest prompt {} ({})\n## Strategies\n{}\n",
                w.id,
                fmt_fit(w),
                w.sections.strategies.trim()
            ));
        }
        let is_best = self.best().is_some_and(|b| b.id == parent.id) && parent.fitness.is_some();
        let task = if is_best {
            "This prompt works best so far. Write a variant of it: either specialise it further for this kernel and device, or generalise what made it work. Keep what is effective."
        } else {
            "Improve this prompt: rewrite the sections that seem to lead to slow or failing kernels, keep what is sound, and add concrete, device-aware advice."
        };
        user.push_str(&format!(
            "\n# Task\n{task}\nAnswer with exactly four sections, each under its Markdown heading, in this order, and nothing else:\n\
             ## Optimisation philosophy\n## Strategies\n## Pitfalls\n## Analysis guidance\n\
             Each section at most {MAX_SECTION_CHARS} characters. Do not mention answer formats or signatures (fixed rules are added separately).\n"
        ));
        let system =
            "You improve the prompts that guide an expert OpenCL C performance engineer. You write concise, concrete, technically correct guidance.";
        Some(MetaRequest {
            parent: parent.id,
            messages: vec![Message::system(system), Message::user(user)],
        })
    }

    /// Adds a variant rewritten from `parent` unless it nearly duplicates one already there;
    /// evicts the weakest tried variant when the population is over its bound. Returns the
    /// new variant's id.
    pub fn insert(
        &mut self,
        sections: Sections,
        parent: Option<usize>,
    ) -> Result<usize, MetaError> {
        for v in &self.variants {
            let similarity = if v.sections == sections {
                1.0
            } else {
                v.sections.similarity(&sections)
            };
            if similarity >= NEAR_DUPLICATE {
                return Err(MetaError::Duplicate {
                    of: v.id,
                    similarity,
                });
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        self.variants.push(PromptVariant {
            id,
            sections,
            fitness: None,
            uses: 0,
            accepted: 0,
            parent,
        });
        while self.variants.len() > self.max_size {
            self.evict(id);
        }
        Ok(id)
    }

    /// Removes the weakest variant other than `keep` and the best: among those tried
    /// `min_uses` times the lowest fitness, else the oldest.
    fn evict(&mut self, keep: usize) {
        let best = self.best().map(|b| b.id);
        let removable = |v: &&PromptVariant| v.id != keep && Some(v.id) != best;
        let tried = self
            .variants
            .iter()
            .filter(removable)
            .filter(|v| v.uses >= self.selection.min_uses)
            .min_by(|a, b| {
                Self::score(a)
                    .total_cmp(&Self::score(b))
                    .then(a.id.cmp(&b.id))
            })
            .map(|v| v.id);
        let victim = tried.or_else(|| self.variants.iter().filter(removable).map(|v| v.id).min());
        match victim {
            Some(id) => self.variants.retain(|v| v.id != id),
            None => {
                // Only `keep` and the best are left: the bound is below 2, never the case.
                self.variants.truncate(self.max_size);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn variant_text(tag: &str) -> String {
        format!(
            "Some intro.\n## Optimisation philosophy\nThink about {tag} first.\n\n## Strategies\n- tile {tag}\n- vectorise {tag} loads\n### Pitfalls\nbarriers in {tag} branches\n**Analysis guidance**\ncompare {tag} times\n"
        )
    }

    #[test]
    fn sections_roundtrip_and_parse() {
        for s in seed_sections() {
            assert_eq!(Sections::parse(&s.render()).unwrap(), s);
        }
        let s = Sections::parse(&format!("```markdown\n{}```", variant_text("memory"))).unwrap();
        assert_eq!(s.philosophy, "Think about memory first.");
        assert_eq!(s.strategies, "- tile memory\n- vectorise memory loads");
        assert_eq!(s.analysis, "compare memory times");
    }

    #[test]
    fn malformed_meta_answers() {
        let missing = "## Optimisation philosophy\nx\n## Strategies\ny\n## Pitfalls\nz\n";
        let err = Sections::parse(missing).unwrap_err();
        assert!(
            err.to_string().contains("`Analysis guidance` is missing"),
            "{err}"
        );
        let twice = format!("{}\n## Strategies\nagain\n", variant_text("a"));
        assert!(Sections::parse(&twice)
            .unwrap_err()
            .to_string()
            .contains("appears twice"));
        let long = variant_text("a").replace("tile a", &"t".repeat(MAX_SECTION_CHARS + 1));
        assert!(matches!(
            Sections::parse(&long),
            Err(MetaError::TooLong {
                section: "Strategies",
                ..
            })
        ));
    }

    #[test]
    fn selection_prefers_fitness_and_explores() {
        let mut p = Population::seeded(8, 0);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for v in &mut p.variants {
            v.uses = 10;
        }
        p.record_score(1, 3.0);
        p.record_score(0, 1.0);
        p.record_score(1, 2.0); // best is kept
        assert_eq!(p.get(1).unwrap().fitness, Some(3.0));
        assert_eq!(p.get(1).unwrap().accepted, 2);
        let mut counts = [0usize; 3];
        for _ in 0..1000 {
            counts[p.select(&mut rng)] += 1;
        }
        assert!(counts[1] > 900, "{counts:?}");
        // A new, unused variant gets the exploration share.
        let id = p
            .insert(Sections::parse(&variant_text("novel")).unwrap(), Some(1))
            .unwrap();
        let mut new_count = 0;
        for _ in 0..100 {
            if p.select(&mut rng) == id {
                new_count += 1;
            }
        }
        assert!(
            new_count >= 1 && p.get(id).unwrap().uses >= p.selection.min_uses,
            "{new_count}"
        );
    }

    #[test]
    fn meta_schedule_and_request() {
        let mut p = Population::seeded(4, 3);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert!(!p.meta_due());
        for _ in 0..3 {
            p.select(&mut rng);
        }
        assert!(p.meta_due());
        p.record_score(2, 5.0);
        let req = p
            .meta_request("kernel `saxpy` on NVIDIA H200", &mut rng)
            .unwrap();
        assert_eq!(req.messages.len(), 2);
        let user = &req.messages[1].content;
        assert!(
            user.contains("saxpy")
                && user.contains("## Analysis guidance")
                && user.contains("best score 5.000")
        );
        assert!(user.contains(&format!("# Prompt {}", req.parent)));
        p.meta_done();
        assert!(!p.meta_due());
        assert!(!Population::seeded(4, 0).meta_due());
    }

    #[test]
    fn duplicates_dropped_and_population_bounded() {
        let mut p = Population::seeded(4, 1);
        let seed0 = seed_sections()[0].clone();
        assert!(matches!(
            p.insert(seed0.clone(), None),
            Err(MetaError::Duplicate { of: 0, .. })
        ));
        let mut near = seed0;
        near.analysis.push_str(" Really.");
        assert!(matches!(
            p.insert(near, None),
            Err(MetaError::Duplicate { of: 0, .. })
        ));
        for v in &mut p.variants {
            v.uses = 5;
        }
        p.record_score(0, 2.0);
        p.record_score(2, 1.0);
        let a = p
            .insert(Sections::parse(&variant_text("alpha")).unwrap(), Some(0))
            .unwrap();
        assert_eq!(p.variants().len(), 4);
        let b = p
            .insert(
                Sections::parse(&variant_text("bravo zulu")).unwrap(),
                Some(0),
            )
            .unwrap();
        assert_eq!(p.variants().len(), 4);
        // Variant 1 (tried, no accepted kernel) left first; the best (0) and the new one stay.
        assert!(
            p.get(1).is_none() && p.get(0).is_some() && p.get(b).is_some() && p.get(a).is_some()
        );
        assert_eq!(b, a + 1, "ids are never reused");
    }

    #[test]
    fn serde_roundtrip() {
        let mut p = Population::seeded(5, 2);
        p.record_score(0, 1.5);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        p.select(&mut rng);
        let back: Population = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }
}
