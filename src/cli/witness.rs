//! `mcp-gauntlet witness`: the witness as a process of its own, over stdio, Streamable HTTP or
//! HTTP+SSE.

use super::flags::WitnessArgs;
use anyhow::Context as _;
use mcp_gauntlet::exit;
use mcp_gauntlet::versions::{Version, KNOWN};
use mcp_gauntlet::witness::{self, Recorder, Witness, WitnessConfig};
use std::sync::Arc;

pub(crate) fn serve(mut args: WitnessArgs) -> anyhow::Result<u8> {
    // Run as its own process, nobody reads its record in memory: keep none (its log, when
    // given, is its record), so it stays bounded however long it is sent requests.
    let recorder = Recorder::log_only(args.log.as_deref()).with_context(|| {
        format!(
            "cannot open the log {}",
            args.log
                .as_deref()
                .unwrap_or(std::path::Path::new(""))
                .display()
        )
    })?;
    let w = Arc::new(Witness::new(config(&mut args)?, recorder));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        if let Some(addr) = args.sse {
            witness::process::serve_sse(&addr, w).await?;
            return Ok(exit::SUCCESS);
        }
        if let Some(addr) = args.http {
            let tls = match (&args.tls_cert, &args.tls_key) {
                (Some(cert), Some(key)) => Some((cert.as_path(), key.as_path())),
                _ => None,
            };
            witness::process::serve_http(&addr, w, tls).await?;
            Ok(exit::SUCCESS)
        } else {
            match witness::stdio::serve(&w, tokio::io::stdin(), tokio::io::stdout()).await {
                Ok(()) => Ok(exit::SUCCESS),
                Err(e) => {
                    eprintln!("witness: {}", mcp_gauntlet::error::error_chain(&e));
                    Ok(exit::CASES_FAILED)
                }
            }
        }
    })
}

/// The witness's configuration from its flags (the modes, quirks and versions taken out).
fn config(args: &mut WitnessArgs) -> anyhow::Result<WitnessConfig> {
    let auth = match &args.auth_config {
        Some(path) => Some(witness::process::auth_verifier(path)?),
        None => None,
    };
    let tool_scopes = args
        .auth_tool_scope
        .iter()
        .map(|t| {
            t.split_once('=')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .with_context(|| format!("--auth-tool-scope wants TOOL=SCOPE, got `{t}`"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(WitnessConfig {
        auth,
        tool_scopes,
        broken: std::mem::take(&mut args.broken).into_iter().collect(),
        quirks: std::mem::take(&mut args.quirk).into_iter().collect(),
        sse: args.sse_answers,
        personality: args.personality,
        versions: versions(args),
        canary_text: args.canary_text.take(),
        stateless: args.stateless,
        canary_log: args.canary_log.take(),
        also_sse: args.also_sse,
    })
}

/// The versions it speaks: those given, or over HTTP+SSE that transport's 2024-11-05 too
/// (and, beside Streamable HTTP, the modern ones as that witness speaks them).
fn versions(args: &mut WitnessArgs) -> Vec<Version> {
    if !(args.sse.is_some() || args.also_sse) || !args.versions.is_empty() {
        return std::mem::take(&mut args.versions);
    }
    let legacy = witness::sse::versions();
    let mut v = legacy.clone();
    if args.sse.is_none() {
        v.extend(KNOWN.iter().filter(|k| !legacy.contains(k)));
    }
    v
}
