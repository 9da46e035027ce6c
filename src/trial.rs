//! One trial: a case sent over a lane, observed, and judged. `run` makes a libtest trial of each
//! (case, lane) with it; `fuzz` judges each generated case with it, so both judge alike.
//!
//! A trial's path: its [`Facts`] are prepared once (placeholders, era, handshake version,
//! method), the case's bytes go out through [`crate::transport::exchange::run_case`] with them
//! (an [`Observation`]), [`crate::verdict::judge`] turns that into a [`Verdict`] under the
//! [`Context`] read from the same facts, and the caller makes a report record of it.

use crate::case::Case;
use crate::settings::Speaking;
use crate::target::Lane;
use crate::transport::exchange::{self, Facts};
use crate::transport::Observation;
use crate::verdict::{self, Context, Verdict};

/// What one trial saw and concluded.
#[derive(Debug)]
pub struct Judged {
    pub observation: Observation,
    pub verdict: Verdict,
}

/// How a trial judges: `settings` already speak the lane's version.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Judging<'a> {
    pub settings: &'a Speaking,
    pub strict: bool,
    /// Values that must never come back or reach any output (`--header` values, tokens).
    pub secrets: &'a [String],
}

impl Judging<'_> {
    /// Prepare the trial of `case` once: its facts, which the exchange reads, and the context
    /// the judge reads them in.
    pub(crate) fn prepare<'c>(&'c self, case: &'c Case, lane: &Lane) -> (Facts<'c>, Context) {
        let facts = Facts::of(case, self.settings);
        let context = self.context(&facts, lane);
        (facts, context)
    }

    /// What the verdict needs besides the case and the observation, read from the trial's facts.
    fn context(&self, facts: &Facts<'_>, lane: &Lane) -> Context {
        let settings = self.settings;
        Context {
            profile: lane.id.profile,
            strict: self.strict,
            transport: lane.id.transport,
            secrets: self.secrets.to_vec(),
            codes: settings.code_table(),
            version: settings.version,
            method: facts.method.clone(),
            placeholders: facts.own.clone(),
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

    /// Send `case` over `lane` and judge what came back.
    pub async fn run(&self, case: &Case, lane: &Lane) -> Judged {
        let (facts, context) = self.prepare(case, lane);
        let (observation, _held) = self.observe(&facts, lane, &context).await;
        let verdict = verdict::judge(case, &observation, &context);
        Judged {
            observation,
            verdict,
        }
    }

    /// Send the case of `facts` over `lane` and observe what came back (judged by the caller
    /// with `context`). A lane whose cases read a witness record gives the trial a copy of its
    /// target to itself when it has copies; otherwise the lane is held, and still held while
    /// the returned [`Held`] lives, so that each case sees only its own part of the record and
    /// what the caller does about the target (restarting it) happens before the next case.
    pub(crate) async fn observe<'l>(
        &self,
        facts: &Facts<'_>,
        lane: &'l Lane,
        context: &Context,
    ) -> (Observation, Held<'l>) {
        let case = facts.case;
        // Decided here once: the endpoint is probed after the case wherever the case needs it
        // alive, and the judge reads what the probe saw.
        let check_alive = context.expectation(case).alive.unwrap_or(true);
        // A series measures the target's process: nothing else runs on the lane meanwhile.
        let exclusive = if case.spec.series.is_some() {
            Exclusive::Alone(lane.exclusive.write().await)
        } else {
            Exclusive::Beside(lane.exclusive.read().await)
        };
        let copy = match &lane.copies {
            Some(copies) => copies.take().await.ok(),
            None => None,
        };
        // Without a copy of its own (none could be started), the lane's one target, one trial
        // at a time.
        let guard = match (&lane.witness, &copy) {
            (Some(_), None) => Some(lane.serial.lock().await),
            _ => None,
        };
        let (endpoint, witness) = match &copy {
            Some(c) => (&c.endpoint, Some(&c.witness)),
            None => (&lane.endpoint, lane.witness.as_ref()),
        };
        let watch = lane.watch.as_ref();
        let observation = exchange::run_case(facts, endpoint, witness, watch, check_alive).await;
        let on_copy = copy.is_some();
        if let (Some(copies), Some(copy)) = (&lane.copies, copy) {
            // Only a copy seen answering after its trial serves another; one the trial left
            // unable to answer, or did not probe, is dropped (its tasks end with it).
            if observation.after.alive == Some(true) && !observation.found_gone() {
                copies.give_back(copy);
            }
        }
        (
            observation,
            Held {
                _guard: guard,
                _exclusive: exclusive,
                on_copy,
            },
        )
    }
}

/// What a trial holds of its lane while the caller judges it: the lane's one target, or a copy
/// of its own that no other trial used meanwhile.
#[derive(Debug)]
pub(crate) struct Held<'l> {
    _guard: Option<tokio::sync::MutexGuard<'l, ()>>,
    _exclusive: Exclusive<'l>,
    /// The trial ran on a copy of the lane's target: whatever it did to it, the lane's own
    /// target is untouched (a copy it left unable to answer is dropped, not given back).
    pub on_copy: bool,
}

/// How a trial holds its lane's process: alone (a series) or beside other trials.
#[derive(Debug)]
enum Exclusive<'l> {
    Alone(#[allow(dead_code)] tokio::sync::RwLockWriteGuard<'l, ()>),
    Beside(#[allow(dead_code)] tokio::sync::RwLockReadGuard<'l, ()>),
}
