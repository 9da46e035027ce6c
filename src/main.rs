//! The `mcp-gauntlet` command: argument parsing and exit codes only; the work is in the library.

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use mcp_gauntlet::case::{Catalogue, Profile};
use mcp_gauntlet::exit;
use mcp_gauntlet::run::{self, RunOptions, Target};
use mcp_gauntlet::settings::{CodeTable, DenyStyle, Settings};
use mcp_gauntlet::target::SseAt;
use mcp_gauntlet::transport::tls::TlsOptions;
use mcp_gauntlet::versions::Spec;
use mcp_gauntlet::witness::{self, Broken, Personality, Quirk, Recorder, Witness, WitnessConfig};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "mcp-gauntlet",
    version,
    about = "Hostile-input conformance suite for MCP transports (Streamable HTTP and stdio)."
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no subcommand, `run`'s options apply (so `mcp-gauntlet -- --list` works).
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the catalogue against a target (no target: the embedded default). libtest flags go after `--`.
    Run(Box<RunArgs>),
    /// Fuzz a target live: smuggled denied calls generated from a seed, judged by the catalogue's
    /// oracles; failures shrunk and saved as case files (`--save DIR`, replay with `run --cases DIR`).
    Fuzz(Box<FuzzArgs>),
    /// Load an HTTP target with concurrent clients, checking every answer (right id, right
    /// result, nothing lost or crossed); reports throughput and latency percentiles. With no
    /// target: the witness and the reference gate in front of one, side by side.
    Load(Box<LoadArgs>),
    /// Measure DESIGN.md's quality bars side by side: canonicalization vs serde_json, the gate vs
    /// direct (HTTP and stdio, 1 and 64 clients), and the catalogue's wall time; ratios printed.
    Bench {
        /// Requests per load measurement.
        #[arg(long, default_value_t = 4000)]
        requests: u64,
    },
    /// Run the witness: a strict, recording MCP server.
    Witness(Box<WitnessArgs>),
    /// Run the reference gate (the same program as the `reference-gate` binary; see its --help).
    #[command(name = "reference-gate", disable_help_flag = true)]
    ReferenceGate {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Render JSON reports (from `run --report`) as one markdown table: cases by target.
    Matrix {
        /// Reports, each `FILE` or `NAME=FILE` (the column's name; default the report's target).
        #[arg(required = true)]
        reports: Vec<String>,
        /// Write the table to FILE instead of stdout.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Also write the matrix as a self-contained HTML page to FILE.
        #[arg(long)]
        html: Option<PathBuf>,
    },
    /// Print the JSON Schema of the case format (the same as cases/schema.json), or with
    /// --targets of the target format (targets/schema.json).
    Schema {
        /// The target files' schema instead.
        #[arg(long)]
        targets: bool,
    },
    /// Run the catalogue against every target of a folder of target files (targets/), lane by
    /// lane, and build the matrix from the lanes' reports; `campaign merge` builds it from
    /// several shards' folders.
    Campaign(Box<CampaignArgs>),
    /// Validate target files (every NAME.json and NAME/target.json under each DIR) and print what
    /// is wrong, with file, line and column.
    CheckTargets {
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
    },
    /// List the published advisories the catalogue reproduces, each with the cases that cite it
    /// (`run --advisories` runs them).
    Advisories,
    /// Make a fixture token issuer: an ES256 private key (`issuer-key.pem`, for `run
    /// --auth-issuer-key`) and its public JWKS (`jwks.json`, for the endpoint), under DIR.
    AuthIssuer {
        /// Where to write the two files.
        #[arg(long)]
        out: PathBuf,
        /// The key id written in the JWKS (and in every token the runner mints).
        #[arg(long, default_value = "gauntlet-1")]
        kid: String,
    },
    /// Validate case files (every file under each DIR) and print what is wrong, with file, line and column.
    CheckCases {
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
    },
}

/// Where cases (or fuzz inputs) go; at most one. None: the embedded default.
#[derive(Args, Debug)]
#[group(multiple = false)]
struct TargetArgs {
    /// A running Streamable HTTP endpoint, e.g. http://127.0.0.1:3000/mcp.
    #[arg(long, group = "url")]
    http: Option<String>,
    /// A stdio server command, as one string split like a shell would (started afresh per case).
    #[arg(long)]
    stdio: Option<String>,
    /// An HTTP gate to start in front of the runner's witness: `{downstream_url}` becomes the
    /// witness URL, `{port}` a free loopback port where the gate must serve /mcp. Gate profile.
    #[arg(long)]
    gate: Option<String>,
    /// A stdio gate to start per case: `{downstream_cmd}` becomes a stdio witness command (one
    /// shell-quoted string, for `sh -c`), `{downstream_argv}` the same command as separate words
    /// (for `my-gate -- {downstream_argv}`). Gate profile.
    #[arg(long)]
    gate_stdio: Option<String>,
    /// An HTTP server to start and test: `{port}` becomes a free loopback port where it must
    /// serve `--serve-path`. The runner knows its process (series cases read its memory, CPU and
    /// descriptors), starts it again when a case leaves it dead and after each series, and stops
    /// it at the end.
    #[arg(long)]
    serve: Option<String>,
    /// A running HTTP+SSE endpoint (the transport of 2024-11-05): the URL whose GET opens the
    /// event stream, e.g. http://127.0.0.1:8000/sse. Only that transport is tested.
    #[arg(long, group = "url")]
    sse: Option<String>,
}

/// What the runner may know of an HTTP target's process.
#[derive(Args, Debug)]
struct ProcessArgs {
    /// With --http or --sse: the server's process ID on this machine, read (with its
    /// descendants) for memory, CPU and descriptors. Without it (or --serve) those are "not
    /// observed".
    #[arg(long, requires = "url")]
    pid: Option<u32>,
    /// With --serve: the path of the MCP endpoint.
    #[arg(long, default_value = "/mcp")]
    serve_path: String,
    /// With --http or --serve: where the target may also serve the HTTP+SSE transport
    /// (2024-11-05), on the same origin; when its GET opens such a stream the target is tested
    /// over both transports. `none`: look for none. (A --http URL that is itself such a stream
    /// is tested over that transport.)
    #[arg(long, default_value = mcp_gauntlet::target::DEFAULT_SSE_PATH)]
    sse_path: String,
}

/// How an https target's certificate is checked.
#[derive(Args, Debug)]
struct TlsArgs {
    /// https: also trust the certificates in this PEM file (besides the platform's roots).
    #[arg(long, value_name = "FILE", requires = "url")]
    ca: Option<PathBuf>,
    /// https: accept any certificate, checking only the handshake (an unauthenticated server).
    #[arg(long, requires = "url", conflicts_with = "ca")]
    insecure: bool,
}

impl TlsArgs {
    fn options(self) -> TlsOptions {
        if self.insecure {
            eprintln!(
                "WARNING: --insecure: the target's TLS certificate is not checked; anyone on the \
                 path can impersonate it, and its verdicts say nothing about who answered"
            );
        }
        TlsOptions {
            ca: self.ca,
            insecure: self.insecure,
        }
    }
}

impl TargetArgs {
    /// The target, and the profile it is judged under (gates always under `gate`).
    fn resolve(
        self,
        witness_log: Option<PathBuf>,
        profile: Profile,
        tls: TlsArgs,
        process: ProcessArgs,
    ) -> (Target, Profile) {
        if let Some(url) = self.http {
            let tls = tls.options();
            (
                Target::Http {
                    url,
                    witness_log,
                    tls,
                    pid: process.pid,
                    sse: SseAt::Beside(Some(process.sse_path)),
                },
                profile,
            )
        } else if let Some(command) = self.serve {
            (
                Target::Serve {
                    command,
                    path: process.serve_path,
                    sse: SseAt::Beside(Some(process.sse_path)),
                },
                profile,
            )
        } else if let Some(url) = self.sse {
            (
                Target::Http {
                    url,
                    witness_log,
                    tls: tls.options(),
                    pid: process.pid,
                    sse: SseAt::Only,
                },
                profile,
            )
        } else if let Some(command) = self.stdio {
            (Target::Stdio { command }, profile)
        } else if let Some(command) = self.gate {
            (Target::Gate { command }, Profile::Gate)
        } else if let Some(command) = self.gate_stdio {
            (Target::GateStdio { command }, Profile::Gate)
        } else {
            (Target::Embedded, profile)
        }
    }
}

/// How each case (or fuzz input) is exchanged with the target.
#[derive(Args, Debug)]
struct ExchangeArgs {
    /// The protocol version(s) to speak. `accepted` (default; `all` is the same): every known
    /// version the target accepts, found by probing it (server/discover, then one initialize
    /// per legacy version), each with its own lanes, and none it does not offer. `newest`: the
    /// newest of those. Or versions, comma-separated (2025-06-18, 2025-11-25, 2026-07-28),
    /// spoken whatever the target offers.
    #[arg(long, default_value = "accepted")]
    spec: Spec,
    /// Seconds one case may take (its alive probe has its own 5 s).
    #[arg(long, default_value_t = 10)]
    case_timeout: u64,
    /// Multiply the runner's deadlines by F: the case timeout, each case's own (the 1 GiB cases
    /// allow 60 s), and the alive and version probes' (5 s; a stdio server/discover probe stays
    /// at most 3 s). Not the settle cap (`--settle-ms`), nor a gate's own deadlines. Above 1 for
    /// a slow machine; below 1 only for a server known never to answer (the runner's own tests
    /// of a mute server).
    #[arg(long, default_value_t = 1.0, value_parser = parse_scale)]
    timeout_scale: f64,
    /// stdio: the most milliseconds to keep reading for a case's answer after the barrier was
    /// answered first. The window itself is learned per target (at least 250 ms, longer for
    /// servers seen answering late or slowly, and for large cases); it ends when the answer is in.
    #[arg(long, default_value_t = 5000)]
    settle_ms: u64,
}

impl ExchangeArgs {
    fn settings(&self) -> Settings {
        Settings {
            case_timeout: Duration::from_secs(self.case_timeout.max(1)).mul_f64(self.timeout_scale),
            probe_timeout: Duration::from_secs(self.case_timeout.clamp(1, 5))
                .mul_f64(self.timeout_scale),
            timeout_scale: self.timeout_scale,
            settle: Duration::from_millis(self.settle_ms),
            ..Settings::default()
        }
    }
}

#[derive(Args, Debug)]
struct LoadArgs {
    #[command(flatten)]
    target: TargetArgs,
    #[command(flatten)]
    tls: TlsArgs,
    #[command(flatten)]
    process: ProcessArgs,
    /// Concurrent clients, each with its own session.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Total requests, spread over the clients (default 2000 when --time is not given either).
    #[arg(long)]
    requests: Option<u64>,
    /// Send for S seconds instead.
    #[arg(long, conflicts_with = "requests")]
    time: Option<u64>,
    /// Seconds one request may take before it counts as lost.
    #[arg(long, default_value_t = 10)]
    request_timeout: u64,
    /// The protocol version to ask for in initialize.
    #[arg(long, default_value = "2025-11-25")]
    spec: mcp_gauntlet::versions::Version,
    /// Every client numbers its requests from 1, as SDK clients do, instead of each client
    /// having ids of its own: a server that matches answers by id alone, across clients, hands
    /// one client another's answer (counted as wrong; CVE-2026-25536).
    #[arg(long)]
    same_ids: bool,
}

#[derive(Args, Debug)]
struct FuzzArgs {
    #[command(flatten)]
    target: TargetArgs,
    #[command(flatten)]
    tls: TlsArgs,
    #[command(flatten)]
    process: ProcessArgs,
    /// The JSON-lines log of the witness behind an --http or --sse gate.
    #[arg(long, requires = "url")]
    witness_log: Option<PathBuf>,
    /// The profile for --http/--stdio: `server` or `gate` (gate targets are always `gate`).
    #[arg(long, default_value = "server", value_parser = parse_profile)]
    profile: Profile,
    /// The generator's seed (printed, so any run can be repeated); random when absent.
    #[arg(long)]
    seed: Option<u64>,
    /// Stop after N inputs (default 1000 when --time is not given either).
    #[arg(long)]
    iterations: Option<u64>,
    /// Stop after S seconds.
    #[arg(long)]
    time: Option<u64>,
    /// Stop after N distinct findings.
    #[arg(long, default_value_t = 10)]
    max_findings: usize,
    /// Write each shrunk failure as a case file under DIR.
    #[arg(long)]
    save: Option<PathBuf>,
    /// How a gate that renames tools names them (as for `run`): every generated input calls
    /// the denied and the allowed tool by that name. A meta-tool cannot wrap the generated
    /// bytes: fuzz such a gate through the catalogue's `smuggling/meta-tool-*` cases instead.
    #[arg(long, value_name = "TEMPLATE")]
    tool_name: Option<String>,
    /// `{server}` in --tool-name.
    #[arg(long, value_name = "NAME", default_value = "witness")]
    tool_server: String,
    #[command(flatten)]
    exchange: ExchangeArgs,
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    target: TargetArgs,
    #[command(flatten)]
    tls: TlsArgs,
    #[command(flatten)]
    process: ProcessArgs,
    /// The JSON-lines log of a witness the target forwards to (with --http or --sse), read as its
    /// record.
    #[arg(long, requires = "url")]
    witness_log: Option<PathBuf>,
    /// Also run the cases under DIR (repeatable).
    #[arg(long = "cases")]
    cases: Vec<PathBuf>,
    /// Apply each case's narrower `strict` set; `should` cases and leaks fail instead of warning.
    #[arg(long)]
    strict: bool,
    /// The profile to run: `server` (any MCP server) or `gate`.
    #[arg(long, default_value = "server", value_parser = parse_profile)]
    profile: Profile,
    /// Add a header to every HTTP request ('Name: value'); its value is redacted and must never come back.
    #[arg(long = "header")]
    headers: Vec<String>,
    #[command(flatten)]
    auth: AuthArgs,
    #[command(flatten)]
    exchange: ExchangeArgs,
    /// Seconds the whole run may take; cases not started by then fail.
    #[arg(long, default_value_t = 1800)]
    total_timeout: u64,
    /// The tool the target must refuse to run (the canary).
    #[arg(long, default_value = witness::CANARY_TOOL)]
    denied_tool: String,
    /// A harmless tool taking {"text": string} (see --allowed-arg).
    #[arg(long, default_value = "echo")]
    allowed_tool: String,
    /// The argument the allowed tool takes its text in (the reference server's `echo` takes
    /// `message`).
    #[arg(long, default_value = "text")]
    allowed_arg: String,
    /// Where a gate that decides per principal reads who calls: `header:NAME` or `query:NAME`
    /// (every HTTP request carries it), `bearer` (the `Authorization: Bearer` token: the
    /// principal's name is the token, or, with --auth-issuer-key, the subject of a token the
    /// runner mints), or `argument:NAME` (a member of every tool call's arguments). The first
    /// is where --principal goes; give more places the gate also reads, and the `identity/`
    /// case that puts --granted-principal there must still be refused.
    #[arg(long, value_name = "PLACE")]
    identity: Vec<mcp_gauntlet::identity::Place>,
    /// The principal the run acts as: allowed the allowed tool, never the denied one.
    #[arg(long, value_name = "NAME", requires = "identity")]
    principal: Option<String>,
    /// A principal the gate does grant the denied tool: the `identity/` cases present its name
    /// spelled otherwise (case, spaces, fullwidth letters) or in a second place, and each must
    /// be refused.
    #[arg(long, value_name = "NAME", requires = "identity")]
    granted_principal: Option<String>,
    /// How a gate that renames tools names them: a template with `{tool}` (the downstream
    /// tool's own name) and `{server}` (--tool-server), e.g. `lab_{tool}` or `{server}__{tool}`.
    /// The cases call tools by that name; what reaches the witness keeps the tools' own names.
    #[arg(long, value_name = "TEMPLATE")]
    tool_name: Option<String>,
    /// How the gate names its downstream's prompts: a template with `{prompt}` and `{server}`
    /// (`{prompt}` alone: their own names). Default: the --tool-name template's spelling
    /// (`{server}__{tool}` names the denied prompt `lab__leak_secrets`).
    #[arg(long, value_name = "TEMPLATE")]
    prompt_name: Option<String>,
    /// `{server}` in --tool-name, --prompt-name and --meta-arguments.
    #[arg(long, value_name = "NAME", default_value = "witness")]
    tool_server: String,
    /// A gate that exposes its tools through one meta-tool: every tool call of the cases
    /// becomes a call of this tool, with the arguments --meta-arguments makes.
    #[arg(long, value_name = "TOOL")]
    meta_tool: Option<String>,
    /// The meta-tool's arguments, a JSON object: one top-level member "{tool}" (the tool's name,
    /// after --tool-name), one "{arguments}" (its arguments), `{server}` in any string.
    #[arg(
        long,
        value_name = "JSON",
        requires = "meta_tool",
        default_value = r#"{"tool": "{tool}", "arguments": "{arguments}"}"#
    )]
    meta_arguments: String,
    /// Text the denied tool answers when it runs, if it says one (empty: none). Without it the
    /// canary is still judged by the protocol: a successful result to a call of --denied-tool,
    /// or any result to a request smuggled behind another, means it ran.
    #[arg(long, default_value = witness::CANARY_MARKER)]
    canary_text: String,
    /// A file the target appends to whenever the denied tool runs (an execution side channel);
    /// any growth during a case means it ran.
    #[arg(long)]
    canary_log: Option<PathBuf>,
    /// How the target refuses a tool call: `error` (a JSON-RPC error, the default) or `result`
    /// (a tool result with isError: true, as some gates do); either runs nothing.
    #[arg(long, default_value = "error", value_parser = parse_deny_style)]
    deny_style: DenyStyle,
    /// The gate's error table, when it is known: `reference` (the reference gate's, -32600,
    /// -32001, -32002, and -32600, -31001, -31002 from 2026-07-28 on) or
    /// MALFORMED,DENIED,DOWNSTREAM for every version. Then a gate's exact answers are judged
    /// (each case's narrower set, its codes from the table); without it a gate is judged
    /// fail-closed: any refusal passes when nothing was forwarded or run.
    #[arg(long, value_name = "TABLE", value_parser = parse_gate_codes, allow_hyphen_values = true)]
    gate_codes: Option<(CodeTable, CodeTable)>,
    /// The table for 2026-07-28 and later (MALFORMED,DENIED,DOWNSTREAM), when it differs from
    /// --gate-codes.
    #[arg(
        long,
        value_name = "TABLE",
        requires = "gate_codes",
        allow_hyphen_values = true
    )]
    gate_modern_codes: Option<CodeTable>,
    /// HTTP targets: a command (one string, run with `sh -c`) that restarts the target after a
    /// case killed it; the runner waits until the URL accepts connections again. Without it the
    /// trials after the death are not run (shown as ignored, with the case that killed it).
    #[arg(long, requires = "url")]
    restart_cmd: Option<String>,
    /// Write a JSON report (format mcp-gauntlet-report/1) to FILE.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Write JUnit XML to FILE (one testcase per trial; failures carry the explanation).
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Write SARIF 2.1.0 to FILE, for code scanning (one rule per case, one result per failed or
    /// warned trial, at the case file; fingerprints stable across runs).
    #[arg(long)]
    sarif: Option<PathBuf>,
    /// Append a Markdown summary to FILE (counts, advisories reproduced, failures and warnings
    /// by family with each trial's first finding): `--summary-md "$GITHUB_STEP_SUMMARY"`.
    #[arg(long, value_name = "FILE")]
    summary_md: Option<PathBuf>,
    /// Known failures (format mcp-gauntlet-baseline/1; YAML when FILE ends in .yaml or .yml,
    /// JSON otherwise): listed failures pass, unlisted failures fail, listed cases that now pass
    /// fail as stale.
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Write this run's failures as a baseline to FILE (YAML for .yaml/.yml, JSON otherwise).
    #[arg(long)]
    write_baseline: Option<PathBuf>,
    /// How many trials run at once (default: the number of cores; for the embedded default,
    /// whose in-process targets are copied for each trial, four per core). Each stdio trial is its own
    /// process and each HTTP trial its own connection and session, so the report is the same
    /// whatever N; `--jobs 1` for a target that cannot take several sessions at once. (libtest's
    /// `-- --test-threads N` still works, and wins.)
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
    /// No trial lines: the end of the run lists the failed trials and prints the counts; on a
    /// terminal a live counter (trials done, elapsed time) shows meanwhile.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Run only the cases that reproduce a published advisory (`cases/advisories.json`); the
    /// run ends with the advisories the target reproduced.
    #[arg(long)]
    advisories: bool,
    /// Run only the cases that reproduce this advisory (a CVE, GHSA or RUSTSEC id, or an
    /// upstream issue as owner/repo#N; repeatable). `mcp-gauntlet advisories` lists them.
    #[arg(long = "advisory", value_name = "ID", value_parser = parse_advisory)]
    advisory: Vec<&'static mcp_gauntlet::advisory::Advisory>,
    /// The package the target is, as ECOSYSTEM:NAME (`npm:@modelcontextprotocol/sdk`,
    /// `PyPI:mcp`): an advisory of that package whose weakness shows is REPRODUCED; any
    /// other's is "as in" it. Without it, the target's `serverInfo` name is compared.
    #[arg(long, value_name = "ECOSYSTEM:NAME", value_parser = parse_package)]
    package: Option<(String, String)>,
    /// Run only shard K of N (1-based), e.g. `--shard 2/4`, to split a run across CI jobs.
    #[arg(long, value_parser = parse_shard)]
    shard: Option<(usize, usize)>,
    /// Arguments for the libtest harness: a filter, --list, --exact, --test-threads N, --format json...
    #[arg(last = true)]
    libtest: Vec<String>,
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct CampaignArgs {
    #[command(subcommand)]
    merge: Option<CampaignCommand>,
    /// The folder of target files.
    #[arg(required = true)]
    targets: Option<PathBuf>,
    /// Where each lane's report, JUnit, log and record go, and the matrix (matrix.md, .html,
    /// .json). A campaign started again over the same folder runs only the lanes not done.
    #[arg(long, required = true)]
    out: Option<PathBuf>,
    /// Where recipes install (reused between campaigns).
    #[arg(long, default_value = "target/campaign-cache")]
    cache: PathBuf,
    /// Only this target (by name; repeatable).
    #[arg(long = "target", value_name = "NAME")]
    only: Vec<String>,
    /// The slow lanes (a target file's `slow: true`): `with` them, `without` them, or `only` them.
    #[arg(long, default_value = "with")]
    slow: mcp_gauntlet::campaign::Slow,
    /// How many targets run at once, each its lanes one after the other.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    targets_at_once: u16,
    /// How many trials of a lane run at once (`run --jobs`; default: the number of cores).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
    /// Run only shard K of N (1-based) of the lanes; `campaign merge` builds the matrix after.
    #[arg(long, value_parser = parse_shard)]
    shard: Option<(usize, usize)>,
    /// The versions each lane speaks (as `run --spec`).
    #[arg(long, default_value = "accepted")]
    spec: Spec,
    /// Also write the matrix's Markdown to FILE, and its HTML beside it (only from a full
    /// campaign: every lane, every case).
    #[arg(long, value_name = "FILE")]
    matrix: Option<PathBuf>,
    /// Also write the ecosystem pages into DIR (README.md, packages/NAME.md): a survey of
    /// packages without baselines, whose failures are findings, not a failed campaign.
    #[arg(long, value_name = "DIR")]
    ecosystem: Option<PathBuf>,
    /// libtest arguments for every lane: filters, `--skip`.
    #[arg(last = true)]
    libtest: Vec<String>,
}

#[derive(Subcommand, Debug)]
enum CampaignCommand {
    /// Build the matrix from several campaign folders (a sharded campaign's), into --out.
    Merge {
        /// The folder of target files the campaign ran.
        #[arg(long)]
        targets: PathBuf,
        /// Where the matrix goes.
        #[arg(long)]
        out: PathBuf,
        /// Also write the Markdown to FILE (its HTML beside it).
        #[arg(long, value_name = "FILE")]
        matrix: Option<PathBuf>,
        /// Also write the ecosystem pages into DIR (as `campaign --ecosystem`).
        #[arg(long, value_name = "DIR")]
        ecosystem: Option<PathBuf>,
        /// The shards' folders.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
    },
}

#[derive(Args, Debug)]
struct WitnessArgs {
    /// Serve Streamable HTTP on ADDR (e.g. 127.0.0.1:0); prints `listening http://ADDR/mcp` first.
    #[arg(long, conflicts_with_all = ["stdio", "sse"], required_unless_present_any = ["stdio", "sse"])]
    http: Option<String>,
    /// Serve the HTTP+SSE transport of 2024-11-05 on ADDR: `GET /sse` opens a session's event
    /// stream, its `endpoint` event names `/messages?session_id=ID`; prints
    /// `listening http://ADDR/sse` first. It speaks 2024-11-05 and the legacy versions after it.
    #[arg(long, value_name = "ADDR", conflicts_with = "stdio")]
    sse: Option<String>,
    /// Serve on stdin/stdout.
    #[arg(long)]
    stdio: bool,
    /// Serve HTTP over TLS with this certificate chain (PEM, leaf first); needs --tls-key.
    #[arg(long, value_name = "FILE", requires_all = ["http", "tls_key"])]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// HTTP: require an OAuth access token on every request, validated as this JSON says (the
    /// reference gate's `auth` section: resource, issuer, jwks_file or jwks_url, ...).
    #[arg(long, value_name = "FILE", requires = "http")]
    auth_config: Option<PathBuf>,
    /// With --auth-config: TOOL needs SCOPE (`TOOL=SCOPE`, repeatable); a call without it gets
    /// 403 insufficient_scope.
    #[arg(long, value_name = "TOOL=SCOPE", requires = "auth_config")]
    auth_tool_scope: Vec<String>,
    /// Append every received message and every tool run to FILE as JSON lines.
    #[arg(long)]
    log: Option<PathBuf>,
    /// Streamable HTTP: answer requests with SSE streams (when the client accepts them)
    /// instead of JSON.
    #[arg(long, requires = "http")]
    sse_answers: bool,
    /// With --http: also serve the HTTP+SSE transport (2024-11-05) on the same port, at `/sse`
    /// and `/messages`, as servers that keep it for older clients do.
    #[arg(long, requires = "http")]
    also_sse: bool,
    /// Deliberately wrong behaviours, for proving that cases can fail (comma-separated or repeated).
    #[arg(long, value_enum, value_delimiter = ',')]
    broken: Vec<Broken>,
    /// Allowed but unusual behaviours of real servers, for proving that verdicts are not
    /// narrower than the specification (comma-separated or repeated).
    #[arg(long, value_enum, value_delimiter = ',')]
    quirk: Vec<Quirk>,
    /// How it reads ambiguous JSON: like the downstream servers a gate sits in front of.
    #[arg(long, value_enum, default_value_t = Personality::Strict)]
    personality: Personality,
    /// The protocol versions it speaks (comma-separated): legacy ones through initialize, modern
    /// ones per request. Default: 2025-06-18, 2025-11-25 and 2026-07-28.
    #[arg(long, value_delimiter = ',')]
    versions: Vec<mcp_gauntlet::versions::Version>,
    /// What the canary tool answers when it runs (default CANARY-EXECUTED).
    #[arg(long)]
    canary_text: Option<String>,
    /// HTTP: issue no Mcp-Session-Id and serve requests without one (the SDKs' stateless mode).
    #[arg(long)]
    stateless: bool,
    /// Append a line to FILE each time the canary runs (an execution side channel).
    #[arg(long)]
    canary_log: Option<PathBuf>,
}

fn parse_scale(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if (0.01..=100.0).contains(&f) => Ok(f),
        _ => Err("expected a number from 0.01 to 100".into()),
    }
}

fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let (k, n) = s.split_once('/').ok_or("expected K/N, e.g. 1/4")?;
    let (k, n): (usize, usize) = (
        k.parse().map_err(|_| "K is not a number")?,
        n.parse().map_err(|_| "N is not a number")?,
    );
    if n == 0 || k == 0 || k > n {
        return Err("expected 1 <= K <= N".into());
    }
    Ok((k, n))
}

fn parse_deny_style(s: &str) -> Result<DenyStyle, String> {
    s.parse()
}

/// `--gate-codes`: `reference`, or one table for every version. The legacy table, then the
/// modern one.
fn parse_gate_codes(s: &str) -> Result<(CodeTable, CodeTable), String> {
    if s == "reference" {
        return Ok((CodeTable::LEGACY, CodeTable::MODERN));
    }
    let table: CodeTable = s.parse()?;
    Ok((table, table))
}

fn parse_profile(s: &str) -> Result<Profile, String> {
    match s {
        "server" => Ok(Profile::Server),
        "gate" => Ok(Profile::Gate),
        _ => Err("expected `server` or `gate`".into()),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit::USAGE
            } else {
                exit::SUCCESS
            });
        }
    };
    let result = match cli.command.unwrap_or(Command::Run(Box::new(cli.run))) {
        Command::Run(args) => run_command(*args),
        Command::Witness(args) => witness_command(*args),
        Command::CheckCases { dirs } => check_cases(dirs),
        Command::Advisories => Catalogue::embedded()
            .map(|cat| {
                print!("{}", mcp_gauntlet::report::advisory_listing(&cat));
                exit::SUCCESS
            })
            .map_err(anyhow::Error::from),
        Command::Matrix {
            reports,
            output,
            html,
        } => matrix(reports, output, html),
        Command::Fuzz(args) => fuzz_command(*args),
        Command::Load(args) => load_command(*args),
        Command::Bench { requests } => mcp_gauntlet::bench::bench(None, requests.max(64))
            .map(|report| {
                print!("{report}");
                exit::SUCCESS
            })
            .map_err(anyhow::Error::from),
        Command::Schema { targets } => {
            if targets {
                print!("{}", mcp_gauntlet::campaign::schema_json());
            } else {
                print!("{}", mcp_gauntlet::case::schema_json());
            }
            Ok(exit::SUCCESS)
        }
        Command::Campaign(args) => campaign_command(*args),
        Command::CheckTargets { dirs } => check_targets(&dirs),
        Command::AuthIssuer { out, kid } => auth_issuer(&out, &kid),
        Command::ReferenceGate { args } => {
            return reference_gate::cli::main_from_args(
                std::iter::once(std::ffi::OsString::from("reference-gate")).chain(args),
            );
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            let untestable = e
                .downcast_ref::<mcp_gauntlet::error::RunError>()
                .is_some_and(mcp_gauntlet::error::RunError::target_untestable);
            ExitCode::from(if untestable {
                exit::UNTESTABLE
            } else {
                exit::SETUP_FAILED
            })
        }
    }
}

fn auth_issuer(out: &std::path::Path, kid: &str) -> anyhow::Result<u8> {
    let issuer = mcp_gauntlet::auth::Issuer::generate("unused", kid)?;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let key = out.join("issuer-key.pem");
    std::fs::write(&key, issuer.private_pem())
        .with_context(|| format!("cannot write {}", key.display()))?;
    let jwks = out.join("jwks.json");
    std::fs::write(&jwks, issuer.jwks())
        .with_context(|| format!("cannot write {}", jwks.display()))?;
    println!("{}\n{}", key.display(), jwks.display());
    Ok(exit::SUCCESS)
}

/// What the runner knows of an HTTP endpoint's authorization (`auth/` cases).
#[derive(Args, Debug)]
struct AuthArgs {
    /// An access token the endpoint accepts: sent on every request, and the base of the
    /// `auth/` cases' bad tokens (alg none, broken signature).
    #[arg(long, value_name = "TOKEN")]
    auth_token: Option<String>,
    /// The issuer's private key (PKCS#8 PEM, EC P-256; `mcp-gauntlet auth-issuer` makes one):
    /// the runner mints the good token (unless --auth-token) and the expired, not-yet-valid,
    /// wrong-audience, wrong-issuer and HMAC-confusion tokens.
    #[arg(long, value_name = "FILE", requires_all = ["auth_issuer", "auth_audience"])]
    auth_issuer_key: Option<PathBuf>,
    /// The `iss` of minted tokens (the endpoint's trusted authorization server).
    #[arg(long, value_name = "URL", requires = "auth_issuer_key")]
    auth_issuer: Option<String>,
    /// The `aud` of minted tokens: the endpoint's resource URI.
    #[arg(long, value_name = "URI", requires = "auth_issuer_key")]
    auth_audience: Option<String>,
    /// The key id minted tokens carry.
    #[arg(long, default_value = "gauntlet-1")]
    auth_kid: String,
    /// The `scope` claim of the minted good token (space-separated).
    #[arg(long, default_value = "")]
    auth_scopes: String,
    /// A tool the good token's scopes do not cover: a call must get 403 insufficient_scope.
    #[arg(long, value_name = "TOOL")]
    auth_scoped_tool: Option<String>,
}

impl AuthArgs {
    fn inputs(&self) -> anyhow::Result<mcp_gauntlet::auth::AuthInputs> {
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
        Ok(mcp_gauntlet::auth::AuthInputs {
            token: self.auth_token.clone(),
            issuer,
            scopes: self.auth_scopes.clone(),
            scoped_tool: self.auth_scoped_tool.clone(),
            subject: None,
        })
    }
}

fn load_command(args: LoadArgs) -> anyhow::Result<u8> {
    use mcp_gauntlet::load::{load, summary, LoadOptions};
    let (target, _) = args
        .target
        .resolve(None, Profile::Server, args.tls, args.process);
    let time = args.time.map(Duration::from_secs);
    let results = load(LoadOptions {
        target,
        concurrency: args.concurrency.max(1),
        requests: if time.is_none() {
            Some(args.requests.unwrap_or(2000))
        } else {
            None
        },
        time,
        request_timeout: Duration::from_secs(args.request_timeout.max(1)),
        spec_version: args.spec,
        same_ids: args.same_ids,
        self_exe: None,
    })?;
    print!("{}", summary(&results));
    Ok(if results.iter().all(|r| r.clean()) {
        exit::SUCCESS
    } else {
        exit::CASES_FAILED
    })
}

fn fuzz_command(args: FuzzArgs) -> anyhow::Result<u8> {
    use mcp_gauntlet::fuzz::live::{fuzz, FuzzOptions};
    let mapping = match mcp_gauntlet::mapping::CallMapping::new(
        args.tool_name.as_deref(),
        &args.tool_server,
        None,
    ) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(exit::USAGE);
        }
    };
    let (target, profile) =
        args.target
            .resolve(args.witness_log, args.profile, args.tls, args.process);
    let outcome = fuzz(FuzzOptions {
        target,
        profile,
        seed: args.seed,
        iterations: args.iterations,
        time: args.time.map(Duration::from_secs),
        max_findings: args.max_findings.max(1),
        save: args.save,
        settings: Settings {
            mapping,
            ..args.exchange.settings()
        },
        spec: args.exchange.spec,
        self_exe: None,
        progress: true,
    })?;
    for f in &outcome.findings {
        println!("finding on [{}]: {:?}", f.lane, f.model);
        if let Some(p) = &f.saved {
            println!("  saved as {}", p.display());
        }
        for line in f.explanation.lines() {
            println!("  {line}");
        }
    }
    Ok(if outcome.findings.is_empty() {
        exit::SUCCESS
    } else {
        exit::CASES_FAILED
    })
}

/// Who the run calls as and how it spells calls (`--identity`, `--tool-name`, ...): `None`
/// (said on stderr) when they cannot be used.
fn spelling(
    args: &RunArgs,
    inputs: &mcp_gauntlet::auth::AuthInputs,
) -> anyhow::Result<
    Option<(
        Option<mcp_gauntlet::identity::Identity>,
        mcp_gauntlet::mapping::CallMapping,
    )>,
> {
    let mut identity = match mcp_gauntlet::identity::Identity::new(
        args.identity.clone(),
        args.principal.clone(),
        args.granted_principal.clone(),
    ) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(None);
        }
    };
    if let Some(id) = identity.as_mut().filter(|i| i.uses_bearer()) {
        let authorization_header = args.headers.iter().any(|h| {
            h.split_once(':')
                .is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case("authorization"))
        });
        if inputs.token.is_some() || authorization_header {
            eprintln!(
                "error: --identity bearer sends each caller's own token; --auth-token or an Authorization --header would be a second"
            );
            return Ok(None);
        }
        // With an issuer, each principal is the subject of a token minted for it; without
        // one, each principal's name is its (opaque) token.
        if inputs.issuer.is_some() {
            id.mint_bearer_tokens(|sub| {
                inputs.token_for_subject(sub).map(Option::unwrap_or_default)
            })?;
        }
    }
    let mapping = match mcp_gauntlet::mapping::CallMapping::new(
        args.tool_name.as_deref(),
        &args.tool_server,
        args.meta_tool
            .as_deref()
            .map(|t| (t, args.meta_arguments.as_str())),
    )
    .and_then(|m| m.with_prompt_name(args.prompt_name.as_deref()))
    {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(None);
        }
    };
    Ok(Some((identity, mapping)))
}

fn run_command(args: RunArgs) -> anyhow::Result<u8> {
    let mut inputs = args.auth.inputs()?;
    // A gate that reads the caller from the token: the tokens the runner mints (the good one,
    // and the `auth/` cases' bad ones) name the run's principal.
    if args
        .identity
        .contains(&mcp_gauntlet::identity::Place::Bearer)
    {
        inputs.subject.clone_from(&args.principal);
    }
    let auth_tokens = inputs.tokens()?;
    // An identity or a mapping that cannot be used is a command line not understood.
    let Some((identity, mapping)) = spelling(&args, &inputs)? else {
        return Ok(exit::USAGE);
    };
    let (target, profile) =
        args.target
            .resolve(args.witness_log, args.profile, args.tls, args.process);
    let opts = RunOptions {
        target,
        profile,
        strict: args.strict,
        extra_cases: args.cases,
        headers: args.headers,
        settings: Settings {
            denied_tool: args.denied_tool,
            allowed_tool: args.allowed_tool,
            allowed_arg: args.allowed_arg,
            mapping,
            identity,
            canary_text: args.canary_text,
            canary_log: args.canary_log,
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
            scoped_tool: inputs.scoped_tool,
            ..args.exchange.settings()
        },
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
            (false, _) => mcp_gauntlet::advisory::Selection::Named(args.advisory),
            (true, true) => mcp_gauntlet::advisory::Selection::Any,
            (true, false) => mcp_gauntlet::advisory::Selection::All,
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

fn witness_command(args: WitnessArgs) -> anyhow::Result<u8> {
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
    let config = WitnessConfig {
        auth,
        tool_scopes,
        broken: args.broken.into_iter().collect(),
        quirks: args.quirk.into_iter().collect(),
        sse: args.sse_answers,
        personality: args.personality,
        // Over HTTP+SSE it also speaks that transport's 2024-11-05 unless told otherwise.
        versions: match (
            args.sse.is_some() || args.also_sse,
            args.versions.is_empty(),
        ) {
            (true, true) => {
                let mut v = witness::sse::versions();
                if args.sse.is_none() {
                    // The modern versions, as the Streamable HTTP witness speaks them.
                    let legacy = witness::sse::versions();
                    v.extend(
                        mcp_gauntlet::versions::KNOWN
                            .iter()
                            .filter(|k| !legacy.contains(k)),
                    );
                }
                v
            }
            _ => args.versions,
        },
        canary_text: args.canary_text,
        stateless: args.stateless,
        canary_log: args.canary_log,
        also_sse: args.also_sse,
    };
    let w = Arc::new(Witness::new(config, recorder));
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

fn matrix(
    reports: Vec<String>,
    output: Option<PathBuf>,
    html: Option<PathBuf>,
) -> anyhow::Result<u8> {
    use mcp_gauntlet::report::{self, ReportFile};
    let loaded = ReportFile::read_all(&reports)?;
    let m = report::Matrix::build(&loaded);
    if let Some(p) = &html {
        std::fs::write(p, m.html()).with_context(|| format!("cannot write {}", p.display()))?;
    }
    let table = m.markdown();
    match output {
        Some(p) => {
            std::fs::write(&p, table).with_context(|| format!("cannot write {}", p.display()))?
        }
        None => print!("{table}"),
    }
    Ok(exit::SUCCESS)
}

/// `--advisory ID`: an advisory of `cases/advisories.json`, by id or alias.
fn parse_advisory(id: &str) -> Result<&'static mcp_gauntlet::advisory::Advisory, String> {
    mcp_gauntlet::advisory::find(id).ok_or_else(|| {
        format!("`{id}` is not in the advisory catalogue (`mcp-gauntlet advisories` lists it)")
    })
}

/// `--package ECOSYSTEM:NAME`.
fn parse_package(s: &str) -> Result<(String, String), String> {
    mcp_gauntlet::advisory::Subject::parse_package(s)
        .ok_or_else(|| format!("`{s}` is not ECOSYSTEM:NAME (npm:@modelcontextprotocol/sdk)"))
}

fn campaign_command(args: CampaignArgs) -> anyhow::Result<u8> {
    use mcp_gauntlet::campaign;
    if let Some(CampaignCommand::Merge {
        targets,
        out,
        matrix,
        ecosystem,
        dirs,
    }) = args.merge
    {
        return campaign_merge(
            &targets,
            &out,
            matrix.as_deref(),
            ecosystem.as_deref(),
            &dirs,
        );
    }
    let (Some(targets), Some(out)) = (args.targets, args.out) else {
        return Ok(exit::USAGE);
    };
    let started = std::time::Instant::now();
    let survey = args.ecosystem.is_some();
    let ecosystem = args
        .ecosystem
        .map(|dir| (dir, campaign::Provenance::here(shown_command())));
    let outcome = campaign::run(&campaign::CampaignOptions {
        targets,
        out,
        cache: args.cache,
        only: args.only,
        slow: args.slow,
        targets_at_once: usize::from(args.targets_at_once),
        jobs: args.jobs.map(usize::from),
        shard: args.shard,
        spec: args.spec,
        libtest_args: args.libtest,
        matrix: args.matrix,
        self_exe: std::env::current_exe().ok(),
        ecosystem,
    })?;
    print!("{}", outcome.summary(started.elapsed().as_secs()));
    if let Some(m) = &outcome.matrix {
        println!("matrix: {} ({} columns)", m.markdown.display(), m.columns);
    }
    if let Some(e) = &outcome.ecosystem {
        println!(
            "ecosystem: {} ({} packages; {} lanes tested, {} could not be)",
            e.index.display(),
            e.packages,
            e.tested,
            e.untested
        );
    }
    Ok(if outcome.tested_nothing() {
        println!("campaign: nothing was tested");
        exit::UNTESTABLE
    } else if survey && outcome.ecosystem.is_some() {
        // A survey's failures are its findings: the campaign did its job when the pages are.
        exit::SUCCESS
    } else if outcome.passed() {
        exit::SUCCESS
    } else {
        exit::CASES_FAILED
    })
}

/// This command line as a reader would type it again: `mcp-gauntlet` for the program, wherever
/// it was run from.
fn shown_command() -> String {
    let mut args: Vec<String> = std::env::args().collect();
    if let Some(first) = args.first_mut() {
        *first = "mcp-gauntlet".to_string();
    }
    // The pages are of every lane in the folder, whichever a run with `--target` or `--shard`
    // added last: the command that makes them all again has neither.
    let mut shown = Vec::with_capacity(args.len());
    let mut args = args.into_iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--" => {
                shown.push(a);
                shown.extend(args.by_ref());
            }
            "--target" | "--shard" => {
                args.next();
            }
            _ if a.starts_with("--target=") || a.starts_with("--shard=") => {}
            _ => shown.push(a),
        }
    }
    shell_words::join(shown)
}

/// `campaign merge`: the matrix from several campaign folders.
fn campaign_merge(
    targets: &std::path::Path,
    out: &std::path::Path,
    matrix: Option<&std::path::Path>,
    ecosystem: Option<&std::path::Path>,
    dirs: &[PathBuf],
) -> anyhow::Result<u8> {
    use mcp_gauntlet::campaign;
    let files = campaign::load_dir(targets)?;
    std::fs::create_dir_all(out).with_context(|| format!("cannot make {}", out.display()))?;
    let m = campaign::write_matrix(&files, dirs, out, matrix)?;
    println!("{} columns: {}", m.columns, m.markdown.display());
    if let Some(dir) = ecosystem {
        let left_out = targets.join(campaign::ecosystem::LEFT_OUT_FILE);
        let made = campaign::Provenance::here(shown_command());
        let e = campaign::write_ecosystem(&files, dirs, Some(&left_out), dir, &made)?;
        println!("ecosystem: {} ({} packages)", e.index.display(), e.packages);
    }
    if m.missing.is_empty() {
        return Ok(exit::SUCCESS);
    }
    // A lane no shard finished is not a column: the matrix is not the whole campaign's.
    println!(
        "missing (no folder has them finished): {}{}",
        m.missing.join(", "),
        if matrix.is_some() {
            "; --matrix not written"
        } else {
            ""
        }
    );
    // The ecosystem pages list those lanes as could-not-test: written whole all the same.
    Ok(if ecosystem.is_some() {
        exit::SUCCESS
    } else {
        exit::INCOMPLETE
    })
}

fn check_targets(dirs: &[PathBuf]) -> anyhow::Result<u8> {
    let mut total = 0;
    for dir in dirs {
        match mcp_gauntlet::campaign::load_dir(dir) {
            Ok(t) => total += t.len(),
            Err(e) => {
                eprintln!("{}", mcp_gauntlet::error::error_chain(&e));
                return Ok(exit::SETUP_FAILED);
            }
        }
    }
    println!("{total} target files valid");
    Ok(exit::SUCCESS)
}

fn check_cases(dirs: Vec<PathBuf>) -> anyhow::Result<u8> {
    let mut cat = Catalogue::default();
    let mut total = 0;
    for dir in &dirs {
        match cat.add_dir(dir) {
            Ok(n) => total += n,
            Err(e) => {
                eprintln!("{}", mcp_gauntlet::error::error_chain(&e));
                return Ok(exit::SETUP_FAILED);
            }
        }
    }
    println!("{total} case files valid");
    Ok(exit::SUCCESS)
}
