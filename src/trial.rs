//! One trial: a case sent over a lane, observed, and judged. `run` makes a libtest trial of each
//! (case, lane) with it; `fuzz` judges each generated case with it, so both judge alike.
//!
//! A trial's path: the case's bytes go out through [`crate::transport::exchange::run_case`] (an
//! [`Observation`]), [`crate::verdict::judge`] turns that into a [`Verdict`] under the
//! [`Context`] built here, and the caller makes a report record of it.

use crate::case::Case;
use crate::settings::Settings;
use crate::target::Lane;
use crate::transport::{exchange, Observation};
use crate::verdict::{self, Context, Verdict};

/// What one trial saw and concluded.
#[derive(Debug)]
pub struct Judged {
    pub observation: Observation,
    pub verdict: Verdict,
}

/// How a trial judges: `settings` already speak the lane's version.
#[derive(Debug, Clone, Copy)]
pub struct Judging<'a> {
    pub settings: &'a Settings,
    pub strict: bool,
    /// Values that must never come back or reach any output (`--header` values, tokens).
    pub secrets: &'a [String],
}

impl Judging<'_> {
    /// What the verdict needs besides the case and the observation.
    pub fn context(&self, case: &Case, lane: &Lane) -> Context {
        let settings = self.settings;
        Context {
            profile: lane.profile,
            strict: self.strict,
            transport: lane.transport,
            secrets: self.secrets.to_vec(),
            codes: settings.code_table(),
            version: settings.spec_version.clone(),
            method: case
                .spec
                .request
                .method
                .clone()
                .unwrap_or_else(|| "POST".into()),
            placeholders: exchange::base_placeholders(settings),
            canary_text: settings.canary_text.clone(),
            deny_style: settings.deny_style,
            exact_codes: settings.exact_codes,
            identity_arguments: settings
                .identity
                .as_ref()
                .map(crate::identity::Identity::argument_names)
                .unwrap_or_default(),
        }
    }

    /// Send `case` over `lane` and judge what came back. A lane whose cases read a shared witness
    /// record is held for the exchange, so each case sees only its own part of the record.
    pub async fn run(&self, case: &Case, lane: &Lane) -> Judged {
        self.run_holding(case, lane).await.0
    }

    /// [`Judging::run`], still holding the lane when it is one whose cases run one at a time, so
    /// that what the caller does about the target (restarting it) happens before the next case.
    pub async fn run_holding<'l>(
        &self,
        case: &Case,
        lane: &'l Lane,
    ) -> (Judged, Option<tokio::sync::MutexGuard<'l, ()>>) {
        let context = self.context(case, lane);
        let check_alive = case
            .expectation(lane.profile, context.narrows(), &context.version)
            .alive
            .unwrap_or(true);
        let guard = match &lane.witness {
            Some(_) => Some(lane.serial.lock().await),
            None => None,
        };
        let observation = exchange::run_case(
            case,
            &lane.endpoint,
            self.settings,
            lane.witness.as_ref(),
            check_alive,
        )
        .await;
        let verdict = verdict::judge(case, &observation, &context);
        (
            Judged {
                observation,
                verdict,
            },
            guard,
        )
    }
}
