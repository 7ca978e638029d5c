//! How `tune` shows what it does: the engine's [`TuneEvent`]s, as lines of text and a progress
//! bar on stderr with the summary table on stdout ([`human`]), or as JSON messages on stdout
//! ([`json`]; notes and warnings among them) with only warnings and errors left on stderr. The
//! flags decide what is
//! shown: `-q` drops the progress and the notes, `-v` adds a line per evaluation.

mod human;
mod json;
mod progress;

use kfoundry_tune::events::{Reporter, TuneEvent};
use kfoundry_tune::{MessageFormat, WorkspaceOptions};

/// The reporter of a `tune` run.
pub struct TuneReporter {
    json: bool,
    human: human::Human,
}

impl TuneReporter {
    /// The reporter `options` ask for (`--message-format`, `-q`, `-v`).
    pub fn new(options: &WorkspaceOptions) -> TuneReporter {
        let json = options.message_format == MessageFormat::Json;
        let quiet = options.quiet || json;
        TuneReporter {
            json,
            human: human::Human::new(human::Shown {
                progress: !quiet,
                notes: !options.quiet,
                evaluations: options.verbose > 0 && !quiet,
                results: !json,
            }),
        }
    }
}

impl Reporter for TuneReporter {
    fn report(&self, event: TuneEvent<'_>) {
        if self.json {
            for message in json::messages(&event) {
                message.emit();
            }
        }
        self.human.report(&event);
    }
}
