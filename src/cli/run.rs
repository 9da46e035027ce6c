//! `mcp-gauntlet run` (and the bare command): the run's flags become [`RunOptions`] and its
//! outcome an exit code.

use super::flags::{AuthArgs, RunArgs};
use super::Usage;
use anyhow::Context as _;
use mcp_gauntlet::advisory::Selection;
use mcp_gauntlet::auth::AuthInputs;
use mcp_gauntlet::exit;
use mcp_gauntlet::identity::{Identity, Place};
use mcp_gauntlet::mapping::CallMapping;
use mcp_gauntlet::run::{self, RunOptions};
use mcp_gauntlet::settings::{CodeTable, Settings};
use std::time::Duration;

pub(crate) fn run(args: RunArgs) -> anyhow::Result<u8> {
    let mut inputs = args.auth.inputs()?;
    // A gate that reads the caller from the token: the tokens the runner mints (the good one,
    // and the `auth/` cases' bad ones) name the run's principal.
    if args.identity.contains(&Place::Bearer) {
        inputs.subject.clone_from(&args.principal);
    }
    let settings = settings(&args, &inputs)?;
    let (target, profile) =
        args.target
            .resolve(args.witness_log, args.profile, args.tls, args.process);
    let opts = RunOptions {
        target,
        profile,
        strict: args.strict,
        extra_cases: args.cases,
        headers: args.headers,
        settings,
        restart_cmd: args.restart_cmd,
        spec: args.exchange.spec,
        total_timeout: Duration::from_secs(args.total_timeout.max(1)),
        report: args.report,
        junit: args.junit,
        sarif: args.sarif,
        summary_md: args.summary_md,
        baseline: args.baseline,
        write_baseline: args.write_baseline,
        shard: args.shard,
        advisories: match (args.advisory.is_empty(), args.advisories) {
            (false, _) => Selection::Named(args.advisory),
            (true, true) => Selection::Any,
            (true, false) => Selection::All,
        },
        package: args.package,
        libtest_args: args.libtest,
        jobs: args.jobs.map(usize::from),
        quiet: args.quiet,
        self_exe: None,
        // This command line up to its libtest arguments: the summary's rerun command adds
        // the failed trials' names.
        rerun_base: Some(
            std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .take_while(|a| a != "--")
                .collect::<Vec<String>>(),
        ),
        log: None,
    };
    let outcome = run::run(opts)?;
    Ok(if !outcome.not_run.is_empty() {
        exit::INCOMPLETE
    } else if outcome.tested_nothing {
        // Every trial not applicable, or not sent: its setup failures test nothing.
        exit::UNTESTABLE
    } else if outcome.failed {
        exit::CASES_FAILED
    } else {
        exit::SUCCESS
    })
}

/// What the run knows of the target: names, codes, who calls, and the tokens it holds.
fn settings(args: &RunArgs, inputs: &AuthInputs) -> anyhow::Result<Settings> {
    let auth_tokens = inputs.tokens()?;
    let (identity, mapping) = spelling(args, inputs)?;
    Ok(Settings {
        denied_tool: args.denied_tool.clone(),
        allowed_tool: args.allowed_tool.clone(),
        allowed_arg: args.allowed_arg.clone(),
        mapping,
        identity,
        canary_text: args.canary_text.clone(),
        canary_log: args.canary_log.clone(),
        deny_style: args.deny_style,
        codes: args
            .gate_codes
            .map_or(CodeTable::LEGACY, |(legacy, _)| legacy),
        modern_codes: args
            .gate_modern_codes
            .or(args.gate_codes.map(|(_, modern)| modern))
            .unwrap_or(CodeTable::MODERN),
        exact_codes: args.gate_codes.is_some(),
        auth_tokens,
        scoped_tool: inputs.scoped_tool.clone(),
        ..args.exchange.settings()
    })
}

/// Who the run calls as and how it spells calls (`--identity`, `--tool-name`, ...); a
/// [`Usage`] error when they cannot be used.
fn spelling(
    args: &RunArgs,
    inputs: &AuthInputs,
) -> anyhow::Result<(Option<Identity>, CallMapping)> {
    let mut identity = Identity::new(
        args.identity.clone(),
        args.principal.clone(),
        args.granted_principal.clone(),
    )
    .map_err(Usage::wrap)?;
    if let Some(id) = identity.as_mut().filter(|i| i.uses_bearer()) {
        let authorization_header = args.headers.iter().any(|h| {
            h.split_once(':')
                .is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case("authorization"))
        });
        if inputs.token.is_some() || authorization_header {
            return Err(Usage::wrap(TwoTokens));
        }
        // With an issuer, each principal is the subject of a token minted for it; without
        // one, each principal's name is its (opaque) token.
        if inputs.issuer.is_some() {
            id.mint_bearer_tokens(|sub| {
                inputs.token_for_subject(sub).map(Option::unwrap_or_default)
            })?;
        }
    }
    let mapping = CallMapping::new(
        args.tool_name.as_deref(),
        &args.tool_server,
        args.meta_tool
            .as_deref()
            .map(|t| (t, args.meta_arguments.as_str())),
    )
    .and_then(|m| m.with_prompt_name(args.prompt_name.as_deref()))
    .map_err(Usage::wrap)?;
    Ok((identity, mapping))
}

/// `--identity bearer` with a token of the run's own besides.
#[derive(Debug, thiserror::Error)]
#[error("--identity bearer sends each caller's own token; --auth-token or an Authorization --header would be a second")]
struct TwoTokens;

impl AuthArgs {
    /// The tokens and the issuer the flags give, the issuer's key read from its file.
    pub(crate) fn inputs(&self) -> anyhow::Result<AuthInputs> {
        let issuer = match (
            &self.auth_issuer_key,
            &self.auth_issuer,
            &self.auth_audience,
        ) {
            (Some(key), Some(iss), Some(aud)) => {
                let pem = std::fs::read_to_string(key)
                    .with_context(|| format!("cannot read {}", key.display()))?;
                let issuer = mcp_gauntlet::auth::Issuer::from_pem(iss, &self.auth_kid, &pem)?;
                Some((issuer, aud.clone()))
            }
            _ => None,
        };
        Ok(AuthInputs {
            token: self.auth_token.clone(),
            issuer,
            scopes: self.auth_scopes.clone(),
            scoped_tool: self.auth_scoped_tool.clone(),
            subject: None,
        })
    }
}
