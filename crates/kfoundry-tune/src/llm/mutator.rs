//! [`Mutator`]: the language-model mutation operator the tuner calls.
//!
//! [`Mutator::propose`] picks a prompt variant, builds the mutation prompt, asks the model,
//! parses and validates the answer, and returns a [`Proposal`] (a full source that keeps the
//! reference signature, with any parameters it declares) or a [`Refusal`] saying why not.
//! The tuner then builds and verifies the proposal like any candidate and calls
//! [`Mutator::report`] with the [`Feedback`]: accepted kernels raise their prompt variant's
//! fitness, failures go to the [`FailureHistory`] shown in later prompts. Every
//! `meta_every` samples a meta-request rewrites a prompt variant (from `report`, or from the
//! next `propose` when no report came).
//!
//! After a permanent error (unreachable endpoint, refused key, unknown model, budget spent)
//! the mutator disables itself: later calls are refused at once, without network traffic.
//! Its state minus the client ([`MutatorState`]) is serializable for resumable tunes.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use kfoundry_rt::model::signature::find_kernel;

use super::chat::{Chat, ChatError, Spent};
use super::config::LlmConfig;
use super::failures::{FailureHistory, FailureKind};
use super::meta::Population;
use super::parse::{
    declared_params, parse_response, render_signature, source_levels, validate, DeclaredParam,
    EditForm, SourceLevels, SourceLimits,
};
use super::prompt::{mutation_messages, MutationContext, PromptLimits};

/// A candidate from the model, ready for the tuner's build + verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// The full new source.
    pub source: String,
    /// Parameters it declares (`// kfoundry-params:`), to search as `-D NAME=value`.
    pub declared_params: Vec<DeclaredParam>,
    /// The id of the prompt variant that produced it (pass it back to [`Mutator::report`]).
    pub prompt_variant: usize,
    /// Its optimisation levels, for the archive's descriptors.
    pub levels: SourceLevels,
    pub form: EditForm,
}

/// What kind of refusal a [`Refusal`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RefusalKind {
    /// The mutator is disabled (see [`Mutator::disabled`]); nothing was sent.
    Disabled,
    /// The request failed; `permanent` ones disable the mutator.
    Chat { permanent: bool },
    /// The answer held no usable code or edits.
    Unparsable,
    /// The code was refused: changed signature, not OpenCL C, too large, bad parameters.
    Invalid,
}

/// Why no proposal came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: String,
    pub kind: RefusalKind,
    /// The prompt variant used, when a request was made.
    pub prompt_variant: Option<usize>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// What became of a proposal in the tuner.
#[derive(Debug, Clone, PartialEq)]
pub enum Feedback {
    /// Built, verified and measured; `score` is higher-is-better (e.g. reference time / time).
    Accepted { score: f64 },
    /// The build failed; `log` is the compiler's output.
    BuildFailed { log: String },
    /// The outputs differ from the reference's.
    Wrong { summary: String },
    /// It crashed, hung or broke a device limit.
    Failed { summary: String },
}

/// What a meta-request did.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaEvent {
    Added { id: usize, parent: usize },
    Duplicate { of: usize },
    Failed { reason: String },
}

/// What the mutator has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub proposals: u32,
    pub chat_errors: u32,
    pub unparsable: u32,
    pub invalid: u32,
    pub accepted: u32,
    pub build_failed: u32,
    pub wrong: u32,
    pub failed: u32,
    pub meta_requests: u32,
    pub meta_added: u32,
    pub meta_rejected: u32,
}

/// Settings taken from the [`LlmConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MutatorSettings {
    /// One mutation per this many evaluations.
    pub every: u32,
    pub prompt: PromptLimits,
    pub source: SourceLimits,
}

impl MutatorSettings {
    /// The settings of `config` (at least one evaluation between mutations).
    pub fn of(config: &LlmConfig) -> MutatorSettings {
        MutatorSettings {
            every: config.every.max(1),
            prompt: PromptLimits::default(),
            source: SourceLimits::default(),
        }
    }
}

/// Everything of a [`Mutator`] but the client: the resumable part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MutatorState {
    pub population: Population,
    pub failures: FailureHistory,
    pub rng: ChaCha8Rng,
    pub counters: Counters,
    /// The client's spending (requests, tokens), restored on resume so caps hold.
    pub spent: Spent,
    /// Why the mutator stopped, after a permanent error.
    pub disabled: Option<String>,
    pub settings: MutatorSettings,
    /// What the last prompt was about ("kernel `k` on device"), for meta-requests.
    pub context: Option<String>,
}

/// The language-model mutation operator.
pub struct Mutator {
    chat: Box<dyn Chat>,
    state: MutatorState,
}

impl std::fmt::Debug for Mutator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mutator")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl Mutator {
    /// A fresh mutator over `chat`, seeded.
    pub fn new(chat: Box<dyn Chat>, config: &LlmConfig, seed: u64) -> Mutator {
        Mutator {
            chat,
            state: MutatorState {
                population: Population::seeded(config.population, config.meta_every),
                failures: FailureHistory::default(),
                rng: ChaCha8Rng::seed_from_u64(seed),
                counters: Counters::default(),
                spent: Spent::default(),
                disabled: None,
                settings: MutatorSettings::of(config),
                context: None,
            },
        }
    }

    /// A fresh mutator over the HTTP client of `config`.
    pub fn from_config(config: &LlmConfig, seed: u64) -> Result<Mutator, ChatError> {
        Ok(Mutator::new(super::connect(config)?, config, seed))
    }

    /// Continues a tune from a saved state.
    /// The settings are `config`'s, not the saved ones (a checkpoint is a file anyone could
    /// edit); the saved population must be usable.
    pub fn resume(
        mut chat: Box<dyn Chat>,
        mut state: MutatorState,
        config: &LlmConfig,
    ) -> Result<Mutator, String> {
        state.settings = MutatorSettings::of(config);
        state.population = state
            .population
            .restored(config.population, config.meta_every)?;
        chat.restore_spent(state.spent);
        Ok(Mutator { chat, state })
    }

    /// The resumable state, with the client's current spending.
    pub fn state(&self) -> MutatorState {
        let mut state = self.state.clone();
        state.spent = self.chat.spent();
        state
    }

    pub fn counters(&self) -> Counters {
        self.state.counters
    }

    pub fn spent(&self) -> Spent {
        self.chat.spent()
    }

    pub fn population(&self) -> &Population {
        &self.state.population
    }

    pub fn failures(&self) -> &FailureHistory {
        &self.state.failures
    }

    /// Why the mutator stopped asking the model, if it did.
    pub fn disabled(&self) -> Option<&str> {
        self.state.disabled.as_deref()
    }

    /// Whether the tuner should ask for a mutation after `evaluations` evaluations (one per
    /// `every`, never when disabled).
    pub fn wants(&self, evaluations: u64) -> bool {
        self.state.disabled.is_none()
            && evaluations.is_multiple_of(u64::from(self.state.settings.every))
    }

    fn chat_failed(&mut self, error: &ChatError) {
        self.state.counters.chat_errors = self.state.counters.chat_errors.saturating_add(1);
        if error.is_permanent() {
            self.state.disabled = Some(error.to_string());
        }
    }

    /// Asks the model for a rewrite of `ctx.parent_source`.
    pub fn propose(&mut self, ctx: &MutationContext) -> Result<Proposal, Refusal> {
        let reject = |kind, reason: String, prompt_variant| Refusal {
            reason,
            kind,
            prompt_variant,
        };
        if let Some(why) = &self.state.disabled {
            return Err(reject(
                RefusalKind::Disabled,
                format!("language model disabled: {why}"),
                None,
            ));
        }
        let context = format!(
            "kernel `{}` on {} {} ({})",
            ctx.kernel, ctx.device.vendor, ctx.device.name, ctx.device.kind
        );
        self.state.context = Some(context);
        if self.state.population.meta_due() {
            self.meta();
            if let Some(why) = &self.state.disabled {
                return Err(reject(
                    RefusalKind::Disabled,
                    format!("language model disabled: {why}"),
                    None,
                ));
            }
        }
        let reference = find_kernel(&ctx.reference_source, Some(&ctx.kernel)).map_err(|e| {
            reject(
                RefusalKind::Invalid,
                format!(
                    "the reference signature of `{}` cannot be read: {e}",
                    ctx.kernel
                ),
                None,
            )
        })?;
        let variant = self.state.population.select(&mut self.state.rng);
        self.state.counters.proposals = self.state.counters.proposals.saturating_add(1);
        let sections = match self.state.population.get(variant) {
            Some(v) => v.sections.clone(),
            None => {
                return Err(reject(
                    RefusalKind::Invalid,
                    format!("prompt variant {variant} vanished"),
                    None,
                ))
            }
        };
        let messages = mutation_messages(
            ctx,
            &render_signature(&reference),
            &sections,
            &self.state.failures,
            &self.state.settings.prompt,
        );
        let reply = match self.chat.complete(&messages) {
            Ok(r) => r,
            Err(e) => {
                self.chat_failed(&e);
                return Err(reject(
                    RefusalKind::Chat {
                        permanent: e.is_permanent(),
                    },
                    e.to_string(),
                    Some(variant),
                ));
            }
        };
        let parsed = match parse_response(&reply.content, &ctx.parent_source) {
            Ok(p) => p,
            Err(e) => {
                self.state.counters.unparsable = self.state.counters.unparsable.saturating_add(1);
                self.state
                    .failures
                    .push(FailureKind::Rejected, &e.to_string());
                return Err(reject(
                    RefusalKind::Unparsable,
                    e.to_string(),
                    Some(variant),
                ));
            }
        };
        if let Err(reason) = self.check(ctx, &parsed.source, &parsed.declared_params, &reference) {
            self.state.counters.invalid = self.state.counters.invalid.saturating_add(1);
            self.state.failures.push(FailureKind::Rejected, &reason);
            return Err(reject(RefusalKind::Invalid, reason, Some(variant)));
        }
        Ok(Proposal {
            levels: source_levels(&parsed.source),
            source: parsed.source,
            declared_params: parsed.declared_params,
            prompt_variant: variant,
            form: parsed.form,
        })
    }

    fn check(
        &self,
        ctx: &MutationContext,
        source: &str,
        declared: &[DeclaredParam],
        reference: &kfoundry_rt::model::signature::KernelSignature,
    ) -> Result<(), String> {
        if source.trim() == ctx.parent_source.trim() {
            return Err("the answer does not change the kernel".into());
        }
        let policy = kfoundry_rt::model::source_policy::Policy {
            allow_asm: ctx.device.kind == "gpu",
        };
        validate(
            source,
            &ctx.kernel,
            reference,
            self.state.settings.source,
            policy,
        )
        .map_err(|e| e.to_string())?;
        // A declared parameter may not shadow one of the annotation's (only re-declare what
        // the parent itself declared).
        let parent_declared = declared_params(&ctx.parent_source).unwrap_or_default();
        for p in declared {
            let existing = ctx.parent_params.iter().any(|(n, _)| *n == p.name);
            if existing && !parent_declared.iter().any(|d| d.name == p.name) {
                return Err(format!(
                    "`// kfoundry-params:` declares `{}`, which is already a tuning parameter",
                    p.name
                ));
            }
        }
        Ok(())
    }

    /// Records what became of a proposal made with prompt variant `prompt_variant`, and runs
    /// a meta-request when one is due.
    pub fn report(&mut self, prompt_variant: usize, feedback: Feedback) -> Option<MetaEvent> {
        let c = &mut self.state.counters;
        match feedback {
            Feedback::Accepted { score } => {
                c.accepted = c.accepted.saturating_add(1);
                self.state.population.record_score(prompt_variant, score);
            }
            Feedback::BuildFailed { log } => {
                c.build_failed = c.build_failed.saturating_add(1);
                self.state.failures.push(FailureKind::Build, &log);
            }
            Feedback::Wrong { summary } => {
                c.wrong = c.wrong.saturating_add(1);
                self.state.failures.push(FailureKind::Wrong, &summary);
            }
            Feedback::Failed { summary } => {
                c.failed = c.failed.saturating_add(1);
                self.state.failures.push(FailureKind::Runtime, &summary);
            }
        }
        if self.state.disabled.is_none() && self.state.population.meta_due() {
            Some(self.meta())
        } else {
            None
        }
    }

    /// One meta-request: rewrite a prompt variant and add it to the population.
    fn meta(&mut self) -> MetaEvent {
        self.state.population.meta_done();
        let context = self
            .state
            .context
            .clone()
            .unwrap_or_else(|| "an OpenCL kernel".into());
        let Some(request) = self
            .state
            .population
            .meta_request(&context, &mut self.state.rng)
        else {
            return MetaEvent::Failed {
                reason: "no prompt variant to rewrite".into(),
            };
        };
        self.state.counters.meta_requests = self.state.counters.meta_requests.saturating_add(1);
        let event = match self.chat.complete(&request.messages) {
            Err(e) => {
                self.chat_failed(&e);
                MetaEvent::Failed {
                    reason: e.to_string(),
                }
            }
            Ok(reply) => match super::meta::Sections::parse(&reply.content) {
                Err(e) => MetaEvent::Failed {
                    reason: e.to_string(),
                },
                Ok(sections) => {
                    match self.state.population.insert(sections, Some(request.parent)) {
                        Ok(id) => MetaEvent::Added {
                            id,
                            parent: request.parent,
                        },
                        Err(super::meta::MetaError::Duplicate { of, .. }) => {
                            MetaEvent::Duplicate { of }
                        }
                        Err(e) => MetaEvent::Failed {
                            reason: e.to_string(),
                        },
                    }
                }
            },
        };
        match event {
            MetaEvent::Added { .. } => {
                self.state.counters.meta_added = self.state.counters.meta_added.saturating_add(1)
            }
            _ => {
                self.state.counters.meta_rejected =
                    self.state.counters.meta_rejected.saturating_add(1)
            }
        }
        event
    }
}

#[cfg(test)]
mod tests {
    use super::super::chat::{Message, Reply};
    use super::super::meta::seed_sections;
    use super::super::parse::MemoryLevel;
    use super::super::prompt::DeviceDescription;
    use super::*;
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use std::rc::Rc;

    /// Answers from a script and records the prompts.
    struct Scripted {
        answers: VecDeque<Result<String, ChatError>>,
        seen: Rc<RefCell<Vec<Vec<Message>>>>,
        spent: Spent,
    }

    impl Chat for Scripted {
        fn complete(&mut self, messages: &[Message]) -> Result<Reply, ChatError> {
            self.seen.borrow_mut().push(messages.to_vec());
            self.spent.requests += 1;
            let answer = self
                .answers
                .pop_front()
                .unwrap_or_else(|| Ok("nothing left".into()))?;
            Ok(Reply {
                content: answer,
                usage: None,
            })
        }
        fn spent(&self) -> Spent {
            self.spent
        }
        fn restore_spent(&mut self, spent: Spent) {
            self.spent = spent;
        }
    }

    type Seen = Rc<RefCell<Vec<Vec<Message>>>>;

    fn mutator(answers: Vec<Result<String, ChatError>>, meta_every: u32) -> (Mutator, Seen) {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let chat = Scripted {
            answers: answers.into(),
            seen: seen.clone(),
            spent: Spent::default(),
        };
        let mut config = LlmConfig::new("http://127.0.0.1:1/v1", "m");
        config.meta_every = meta_every;
        config.every = 5;
        (Mutator::new(Box::new(chat), &config, 42), seen)
    }

    const REFERENCE: &str =
        "__kernel void scale(const int n, __global const float* x, __global float* y) {\n    int i = get_global_id(0);\n    y[i] = 3.0f * x[i];\n}\n";
    const FASTER: &str = "```c\n// kfoundry-params: UNROLL=[1,2,4]\n__kernel void scale(const int n, __global const float* x, __global float* y) {\n    int i = get_global_id(0);\n    float4 v = vload4(i, x);\n    vstore4(3.0f * v, i, y);\n}\n```";
    const CHANGED_SIGNATURE: &str = "```c\n__kernel void scale(const int n, __global float* x, __global float* y) { y[0] = x[0]; }\n```";

    fn ctx() -> MutationContext {
        MutationContext {
            kernel: "scale".into(),
            reference_source: REFERENCE.into(),
            parent_source: REFERENCE.into(),
            parent_params: vec![("WG".into(), 64)],
            geometry: Some("global = n, local = WG".into()),
            device: DeviceDescription {
                vendor: "pocl".into(),
                name: "cpu".into(),
                kind: "cpu".into(),
                ..Default::default()
            },
            time: Some(1e-3),
            reference_time: Some(1e-3),
            roofline_fraction: None,
            inspirations: vec![],
            hints: vec!["vectorise global loads".into()],
        }
    }

    fn meta_answer(tag: &str) -> String {
        format!("## Optimisation philosophy\n{tag} philosophy words\n## Strategies\n{tag} strategy list\n## Pitfalls\n{tag} pitfalls here\n## Analysis guidance\n{tag} analysis text\n")
    }

    #[test]
    fn good_rewrite_is_proposed() {
        let (mut m, seen) = mutator(vec![Ok(FASTER.into())], 0);
        let p = m.propose(&ctx()).unwrap();
        assert!(p.source.contains("vload4"));
        assert_eq!(
            p.declared_params,
            vec![DeclaredParam {
                name: "UNROLL".into(),
                values: vec![1, 2, 4]
            }]
        );
        assert_eq!(p.levels.memory, MemoryLevel::Vectorised);
        assert!(m.population().get(p.prompt_variant).is_some());
        let prompt = &seen.borrow()[0];
        assert!(prompt[0]
            .content
            .contains("__kernel void scale(int n, __global const float* x, __global float* y)"));
        assert!(prompt[1].content.contains("vectorise global loads"));
        assert_eq!(
            m.report(p.prompt_variant, Feedback::Accepted { score: 1.8 }),
            None
        );
        assert_eq!(
            m.population().get(p.prompt_variant).unwrap().fitness,
            Some(1.8)
        );
        assert_eq!(m.counters().accepted, 1);
    }

    #[test]
    fn bad_answers_are_rejected_and_remembered() {
        let shadowing =
            "```c\n// kfoundry-params: WG=[1,2]\n__kernel void scale(const int n, __global const float* x, __global float* y) { y[0] = 1; }\n```";
        let (mut m, seen) = mutator(
            vec![
                Ok(CHANGED_SIGNATURE.into()),
                Ok("Sorry, I can't.".into()),
                Ok(format!("```c\n{REFERENCE}```")),
                Ok(shadowing.into()),
                Err(ChatError::Timeout {
                    url: "u".into(),
                    secs: 1.0,
                    attempts: 2,
                }),
                Ok(FASTER.into()),
            ],
            0,
        );
        let r = m.propose(&ctx()).unwrap_err();
        assert_eq!(r.kind, RefusalKind::Invalid);
        assert!(r.reason.contains("argument 2 (`x`)"), "{}", r.reason);
        assert_eq!(m.propose(&ctx()).unwrap_err().kind, RefusalKind::Unparsable);
        assert!(m
            .propose(&ctx())
            .unwrap_err()
            .reason
            .contains("does not change"));
        assert!(m
            .propose(&ctx())
            .unwrap_err()
            .reason
            .contains("`WG`, which is already"));
        let t = m.propose(&ctx()).unwrap_err();
        assert_eq!(t.kind, RefusalKind::Chat { permanent: false });
        assert!(m.disabled().is_none(), "a timeout does not disable");
        let p = m.propose(&ctx()).unwrap();
        m.report(
            p.prompt_variant,
            Feedback::BuildFailed {
                log: "error: use of undeclared identifier 'UNROLL'".into(),
            },
        );
        m.report(
            p.prompt_variant,
            Feedback::Wrong {
                summary: "y[7]: expected 3.0, got 0.0".into(),
            },
        );
        assert_eq!(m.failures().len(), 6);
        let last_prompt = &seen.borrow()[5][1].content;
        assert!(
            last_prompt.contains("argument 2 (`x`)")
                && last_prompt.contains("neither SEARCH/REPLACE")
        );
        let c = m.counters();
        assert_eq!(
            (
                c.proposals,
                c.invalid,
                c.unparsable,
                c.chat_errors,
                c.build_failed,
                c.wrong
            ),
            (6, 3, 1, 1, 1, 1)
        );
    }

    #[test]
    fn permanent_errors_disable_without_traffic() {
        let refused = ChatError::KeyRefused {
            url: "u".into(),
            status: 401,
            key_env: "K".into(),
            key_sent: true,
        };
        let (mut m, seen) = mutator(vec![Err(refused)], 0);
        let r = m.propose(&ctx()).unwrap_err();
        assert_eq!(r.kind, RefusalKind::Chat { permanent: true });
        assert!(m.disabled().unwrap().contains("refused the API key"));
        assert!(!m.wants(0));
        let again = m.propose(&ctx()).unwrap_err();
        assert_eq!(again.kind, RefusalKind::Disabled);
        assert_eq!(seen.borrow().len(), 1, "no second request");
    }

    #[test]
    fn meta_requests_on_schedule() {
        let (mut m, seen) = mutator(
            vec![
                Ok(FASTER.into()),
                Ok(FASTER.into()),
                Ok(meta_answer("first")),
                Ok(FASTER.into()),
                Ok(FASTER.into()),
                Ok(seed_sections()[0].render()),
                Ok(FASTER.into()),
                Ok(FASTER.into()),
                Ok("## Strategies\nonly one".into()),
            ],
            2,
        );
        let mut events = Vec::new();
        for _ in 0..6 {
            let p = m.propose(&ctx()).unwrap();
            events.extend(m.report(p.prompt_variant, Feedback::Accepted { score: 1.2 }));
        }
        assert_eq!(events.len(), 3);
        assert!(
            matches!(events[0], MetaEvent::Added { id: 3, .. }),
            "{events:?}"
        );
        assert_eq!(events[1], MetaEvent::Duplicate { of: 0 });
        assert!(matches!(&events[2], MetaEvent::Failed { reason } if reason.contains("missing")));
        assert_eq!(m.population().variants().len(), 4);
        let meta_prompt = &seen.borrow()[2][1].content;
        assert!(
            meta_prompt.contains("kernel `scale` on pocl cpu"),
            "{meta_prompt}"
        );
        let c = m.counters();
        assert_eq!((c.meta_requests, c.meta_added, c.meta_rejected), (3, 1, 2));
    }

    #[test]
    fn meta_also_runs_from_propose_when_nothing_is_reported() {
        let (mut m, seen) = mutator(
            vec![
                Ok("no".into()),
                Ok("no".into()),
                Ok(meta_answer("x")),
                Ok(FASTER.into()),
            ],
            2,
        );
        m.propose(&ctx()).unwrap_err();
        m.propose(&ctx()).unwrap_err();
        m.propose(&ctx()).unwrap();
        assert_eq!(seen.borrow().len(), 4);
        assert_eq!(m.counters().meta_added, 1);
    }

    #[test]
    fn state_roundtrips_and_resumes_deterministically() {
        let answers = || vec![Ok(FASTER.into()), Ok(FASTER.into()), Ok(FASTER.into())];
        let (mut a, _) = mutator(answers(), 0);
        let p = a.propose(&ctx()).unwrap();
        a.report(p.prompt_variant, Feedback::Accepted { score: 2.0 });
        let json = serde_json::to_string(&a.state()).unwrap();
        let state: MutatorState = serde_json::from_str(&json).unwrap();
        assert_eq!(state, a.state());
        assert_eq!(state.spent.requests, 1);
        let seen = Rc::new(RefCell::new(Vec::new()));
        let chat = Scripted {
            answers: answers().into(),
            seen,
            spent: Spent::default(),
        };
        let mut config = LlmConfig::new("http://127.0.0.1:1/v1", "m");
        config.meta_every = 0;
        config.every = 5;
        let mut b = Mutator::resume(Box::new(chat), state.clone(), &config).unwrap();
        assert_eq!(b.spent().requests, 1, "spending restored");
        for _ in 0..2 {
            assert_eq!(
                a.propose(&ctx()).unwrap().prompt_variant,
                b.propose(&ctx()).unwrap().prompt_variant
            );
        }
        assert_eq!(a.state(), b.state());
        // An edited state: the settings are the configuration's, an empty population is refused.
        let mut edited = state;
        edited.settings.every = 0;
        let chat = || {
            Box::new(Scripted {
                answers: answers().into(),
                seen: Rc::new(RefCell::new(Vec::new())),
                spent: Spent::default(),
            })
        };
        let c = Mutator::resume(chat(), edited.clone(), &config).unwrap();
        assert!(
            !c.wants(7) && c.wants(10),
            "one mutation per 5 evaluations, as configured"
        );
        let mut v = serde_json::to_value(&edited).unwrap();
        v["population"]["variants"] = serde_json::json!([]);
        let emptied: MutatorState = serde_json::from_value(v).unwrap();
        assert!(Mutator::resume(chat(), emptied, &config)
            .unwrap_err()
            .contains("empty"));
    }

    #[test]
    fn wants_one_in_every() {
        let (m, _) = mutator(vec![], 0);
        let wanted: Vec<u64> = (0..12).filter(|&e| m.wants(e)).collect();
        assert_eq!(wanted, vec![0, 5, 10]);
    }
}
