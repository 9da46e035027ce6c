//! The command line: every subcommand's flags (clap types) and how they become the library's
//! options. Nothing here runs anything; `cli/` modules beside it do.

use clap::{Args, Parser, Subcommand};
use mcp_gauntlet::case::Profile;
use mcp_gauntlet::run::Target;
use mcp_gauntlet::settings::{CodeTable, DenyStyle, Settings};
use mcp_gauntlet::target::SseAt;
use mcp_gauntlet::transport::tls::TlsOptions;
use mcp_gauntlet::versions::Spec;
use mcp_gauntlet::witness::{self, Broken, Personality, Quirk};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "mcp-gauntlet",
    version,
    about = "Hostile-input conformance suite for MCP transports (Streamable HTTP and stdio)."
)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Option<Command>,
    /// With no subcommand, `run`'s options apply (so `mcp-gauntlet -- --list` works).
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
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
pub(crate) struct TargetArgs {
    /// A running Streamable HTTP endpoint, e.g. http://127.0.0.1:3000/mcp.
    #[arg(long, group = "url")]
    pub(crate) http: Option<String>,
    /// A stdio server command, as one string split like a shell would (started afresh per case).
    #[arg(long)]
    pub(crate) stdio: Option<String>,
    /// An HTTP gate to start in front of the runner's witness: `{downstream_url}` becomes the
    /// witness URL, `{port}` a free loopback port where the gate must serve /mcp. Gate profile.
    #[arg(long)]
    pub(crate) gate: Option<String>,
    /// A stdio gate to start per case: `{downstream_cmd}` becomes a stdio witness command (one
    /// shell-quoted string, for `sh -c`), `{downstream_argv}` the same command as separate words
    /// (for `my-gate -- {downstream_argv}`). Gate profile.
    #[arg(long)]
    pub(crate) gate_stdio: Option<String>,
    /// An HTTP server to start and test: `{port}` becomes a free loopback port where it must
    /// serve `--serve-path`. The runner knows its process (series cases read its memory, CPU and
    /// descriptors), starts it again when a case leaves it dead and after each series, and stops
    /// it at the end.
    #[arg(long)]
    pub(crate) serve: Option<String>,
    /// A running HTTP+SSE endpoint (the transport of 2024-11-05): the URL whose GET opens the
    /// event stream, e.g. http://127.0.0.1:8000/sse. Only that transport is tested.
    #[arg(long, group = "url")]
    pub(crate) sse: Option<String>,
}

/// What the runner may know of an HTTP target's process.
#[derive(Args, Debug)]
pub(crate) struct ProcessArgs {
    /// With --http or --sse: the server's process ID on this machine, read (with its
    /// descendants) for memory, CPU and descriptors. Without it (or --serve) those are "not
    /// observed".
    #[arg(long, requires = "url")]
    pub(crate) pid: Option<u32>,
    /// With --serve: the path of the MCP endpoint.
    #[arg(long, default_value = "/mcp")]
    pub(crate) serve_path: String,
    /// With --http or --serve: where the target may also serve the HTTP+SSE transport
    /// (2024-11-05), on the same origin; when its GET opens such a stream the target is tested
    /// over both transports. `none`: look for none. (A --http URL that is itself such a stream
    /// is tested over that transport.)
    #[arg(long, default_value = mcp_gauntlet::target::DEFAULT_SSE_PATH)]
    pub(crate) sse_path: String,
}

/// How an https target's certificate is checked.
#[derive(Args, Debug)]
pub(crate) struct TlsArgs {
    /// https: also trust the certificates in this PEM file (besides the platform's roots).
    #[arg(long, value_name = "FILE", requires = "url")]
    pub(crate) ca: Option<PathBuf>,
    /// https: accept any certificate, checking only the handshake (an unauthenticated server).
    #[arg(long, requires = "url", conflicts_with = "ca")]
    pub(crate) insecure: bool,
}

impl TlsArgs {
    pub(crate) fn options(self) -> TlsOptions {
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
    pub(crate) fn resolve(
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
pub(crate) struct ExchangeArgs {
    /// The protocol version(s) to speak. `accepted` (default; `all` is the same): every known
    /// version the target accepts, found by probing it (server/discover, then one initialize
    /// per legacy version), each with its own lanes, and none it does not offer. `newest`: the
    /// newest of those. Or versions, comma-separated (2025-06-18, 2025-11-25, 2026-07-28),
    /// spoken whatever the target offers.
    #[arg(long, default_value = "accepted")]
    pub(crate) spec: Spec,
    /// Seconds one case may take (its alive probe has its own 5 s).
    #[arg(long, default_value_t = 10)]
    pub(crate) case_timeout: u64,
    /// Multiply the runner's deadlines by F: the case timeout, each case's own (the 1 GiB cases
    /// allow 60 s), and the alive and version probes' (5 s; a stdio server/discover probe stays
    /// at most 3 s). Not the settle cap (`--settle-ms`), nor a gate's own deadlines. Above 1 for
    /// a slow machine; below 1 only for a server known never to answer (the runner's own tests
    /// of a mute server).
    #[arg(long, default_value_t = 1.0, value_parser = parse_scale)]
    pub(crate) timeout_scale: f64,
    /// stdio: the most milliseconds to keep reading for a case's answer after the barrier was
    /// answered first. The window itself is learned per target (at least 250 ms, longer for
    /// servers seen answering late or slowly, and for large cases); it ends when the answer is in.
    #[arg(long, default_value_t = 5000)]
    pub(crate) settle_ms: u64,
}

impl ExchangeArgs {
    pub(crate) fn settings(&self) -> Settings {
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
pub(crate) struct LoadArgs {
    #[command(flatten)]
    pub(crate) target: TargetArgs,
    #[command(flatten)]
    pub(crate) tls: TlsArgs,
    #[command(flatten)]
    pub(crate) process: ProcessArgs,
    /// Concurrent clients, each with its own session.
    #[arg(long, default_value_t = 8)]
    pub(crate) concurrency: usize,
    /// Total requests, spread over the clients (default 2000 when --time is not given either).
    #[arg(long)]
    pub(crate) requests: Option<u64>,
    /// Send for S seconds instead.
    #[arg(long, conflicts_with = "requests")]
    pub(crate) time: Option<u64>,
    /// Seconds one request may take before it counts as lost.
    #[arg(long, default_value_t = 10)]
    pub(crate) request_timeout: u64,
    /// The protocol version to ask for in initialize.
    #[arg(long, default_value = "2025-11-25")]
    pub(crate) spec: mcp_gauntlet::versions::Version,
    /// Every client numbers its requests from 1, as SDK clients do, instead of each client
    /// having ids of its own: a server that matches answers by id alone, across clients, hands
    /// one client another's answer (counted as wrong; CVE-2026-25536).
    #[arg(long)]
    pub(crate) same_ids: bool,
}

#[derive(Args, Debug)]
pub(crate) struct FuzzArgs {
    #[command(flatten)]
    pub(crate) target: TargetArgs,
    #[command(flatten)]
    pub(crate) tls: TlsArgs,
    #[command(flatten)]
    pub(crate) process: ProcessArgs,
    /// The JSON-lines log of the witness behind an --http or --sse gate.
    #[arg(long, requires = "url")]
    pub(crate) witness_log: Option<PathBuf>,
    /// The profile for --http/--stdio: `server` or `gate` (gate targets are always `gate`).
    #[arg(long, default_value = "server", value_parser = parse_profile)]
    pub(crate) profile: Profile,
    /// The generator's seed (printed, so any run can be repeated); random when absent.
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Stop after N inputs (default 1000 when --time is not given either).
    #[arg(long)]
    pub(crate) iterations: Option<u64>,
    /// Stop after S seconds.
    #[arg(long)]
    pub(crate) time: Option<u64>,
    /// Stop after N distinct findings.
    #[arg(long, default_value_t = 10)]
    pub(crate) max_findings: usize,
    /// Write each shrunk failure as a case file under DIR.
    #[arg(long)]
    pub(crate) save: Option<PathBuf>,
    /// How a gate that renames tools names them (as for `run`): every generated input calls
    /// the denied and the allowed tool by that name. A meta-tool cannot wrap the generated
    /// bytes: fuzz such a gate through the catalogue's `smuggling/meta-tool-*` cases instead.
    #[arg(long, value_name = "TEMPLATE")]
    pub(crate) tool_name: Option<String>,
    /// `{server}` in --tool-name.
    #[arg(long, value_name = "NAME", default_value = "witness")]
    pub(crate) tool_server: String,
    #[command(flatten)]
    pub(crate) exchange: ExchangeArgs,
}

#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) target: TargetArgs,
    #[command(flatten)]
    pub(crate) tls: TlsArgs,
    #[command(flatten)]
    pub(crate) process: ProcessArgs,
    /// The JSON-lines log of a witness the target forwards to (with --http or --sse), read as its
    /// record.
    #[arg(long, requires = "url")]
    pub(crate) witness_log: Option<PathBuf>,
    /// Also run the cases under DIR (repeatable).
    #[arg(long = "cases")]
    pub(crate) cases: Vec<PathBuf>,
    /// Apply each case's narrower `strict` set; `should` cases and leaks fail instead of warning.
    #[arg(long)]
    pub(crate) strict: bool,
    /// The profile to run: `server` (any MCP server) or `gate`.
    #[arg(long, default_value = "server", value_parser = parse_profile)]
    pub(crate) profile: Profile,
    /// Add a header to every HTTP request ('Name: value'); its value is redacted and must never come back.
    #[arg(long = "header")]
    pub(crate) headers: Vec<String>,
    #[command(flatten)]
    pub(crate) auth: AuthArgs,
    #[command(flatten)]
    pub(crate) exchange: ExchangeArgs,
    /// Seconds the whole run may take; cases not started by then fail.
    #[arg(long, default_value_t = 1800)]
    pub(crate) total_timeout: u64,
    /// The tool the target must refuse to run (the canary).
    #[arg(long, default_value = witness::CANARY_TOOL)]
    pub(crate) denied_tool: String,
    /// A harmless tool taking {"text": string} (see --allowed-arg).
    #[arg(long, default_value = "echo")]
    pub(crate) allowed_tool: String,
    /// The argument the allowed tool takes its text in (the reference server's `echo` takes
    /// `message`).
    #[arg(long, default_value = "text")]
    pub(crate) allowed_arg: String,
    /// Where a gate that decides per principal reads who calls: `header:NAME` or `query:NAME`
    /// (every HTTP request carries it), `bearer` (the `Authorization: Bearer` token: the
    /// principal's name is the token, or, with --auth-issuer-key, the subject of a token the
    /// runner mints), or `argument:NAME` (a member of every tool call's arguments). The first
    /// is where --principal goes; give more places the gate also reads, and the `identity/`
    /// case that puts --granted-principal there must still be refused.
    #[arg(long, value_name = "PLACE")]
    pub(crate) identity: Vec<mcp_gauntlet::identity::Place>,
    /// The principal the run acts as: allowed the allowed tool, never the denied one.
    #[arg(long, value_name = "NAME", requires = "identity")]
    pub(crate) principal: Option<String>,
    /// A principal the gate does grant the denied tool: the `identity/` cases present its name
    /// spelled otherwise (case, spaces, fullwidth letters) or in a second place, and each must
    /// be refused.
    #[arg(long, value_name = "NAME", requires = "identity")]
    pub(crate) granted_principal: Option<String>,
    /// How a gate that renames tools names them: a template with `{tool}` (the downstream
    /// tool's own name) and `{server}` (--tool-server), e.g. `lab_{tool}` or `{server}__{tool}`.
    /// The cases call tools by that name; what reaches the witness keeps the tools' own names.
    #[arg(long, value_name = "TEMPLATE")]
    pub(crate) tool_name: Option<String>,
    /// How the gate names its downstream's prompts: a template with `{prompt}` and `{server}`
    /// (`{prompt}` alone: their own names). Default: the --tool-name template's spelling
    /// (`{server}__{tool}` names the denied prompt `lab__leak_secrets`).
    #[arg(long, value_name = "TEMPLATE")]
    pub(crate) prompt_name: Option<String>,
    /// `{server}` in --tool-name, --prompt-name and --meta-arguments.
    #[arg(long, value_name = "NAME", default_value = "witness")]
    pub(crate) tool_server: String,
    /// A gate that exposes its tools through one meta-tool: every tool call of the cases
    /// becomes a call of this tool, with the arguments --meta-arguments makes.
    #[arg(long, value_name = "TOOL")]
    pub(crate) meta_tool: Option<String>,
    /// The meta-tool's arguments, a JSON object: one top-level member "{tool}" (the tool's name,
    /// after --tool-name), one "{arguments}" (its arguments), `{server}` in any string.
    #[arg(
        long,
        value_name = "JSON",
        requires = "meta_tool",
        default_value = r#"{"tool": "{tool}", "arguments": "{arguments}"}"#
    )]
    pub(crate) meta_arguments: String,
    /// Text the denied tool answers when it runs, if it says one (empty: none). Without it the
    /// canary is still judged by the protocol: a successful result to a call of --denied-tool,
    /// or any result to a request smuggled behind another, means it ran.
    #[arg(long, default_value = witness::CANARY_MARKER)]
    pub(crate) canary_text: String,
    /// A file the target appends to whenever the denied tool runs (an execution side channel);
    /// any growth during a case means it ran.
    #[arg(long)]
    pub(crate) canary_log: Option<PathBuf>,
    /// How the target refuses a tool call: `error` (a JSON-RPC error, the default) or `result`
    /// (a tool result with isError: true, as some gates do); either runs nothing.
    #[arg(long, default_value = "error", value_parser = parse_deny_style)]
    pub(crate) deny_style: DenyStyle,
    /// The gate's error table, when it is known: `reference` (the reference gate's, -32600,
    /// -32001, -32002, and -32600, -31001, -31002 from 2026-07-28 on) or
    /// MALFORMED,DENIED,DOWNSTREAM for every version. Then a gate's exact answers are judged
    /// (each case's narrower set, its codes from the table); without it a gate is judged
    /// fail-closed: any refusal passes when nothing was forwarded or run.
    #[arg(long, value_name = "TABLE", value_parser = parse_gate_codes, allow_hyphen_values = true)]
    pub(crate) gate_codes: Option<(CodeTable, CodeTable)>,
    /// The table for 2026-07-28 and later (MALFORMED,DENIED,DOWNSTREAM), when it differs from
    /// --gate-codes.
    #[arg(
        long,
        value_name = "TABLE",
        requires = "gate_codes",
        allow_hyphen_values = true
    )]
    pub(crate) gate_modern_codes: Option<CodeTable>,
    /// HTTP targets: a command (one string, run with `sh -c`) that restarts the target after a
    /// case killed it; the runner waits until the URL accepts connections again. Without it the
    /// trials after the death are not run (shown as ignored, with the case that killed it).
    #[arg(long, requires = "url")]
    pub(crate) restart_cmd: Option<String>,
    /// Write a JSON report (format mcp-gauntlet-report/1) to FILE.
    #[arg(long)]
    pub(crate) report: Option<PathBuf>,
    /// Write JUnit XML to FILE (one testcase per trial; failures carry the explanation).
    #[arg(long)]
    pub(crate) junit: Option<PathBuf>,
    /// Write SARIF 2.1.0 to FILE, for code scanning (one rule per case, one result per failed or
    /// warned trial, at the case file; fingerprints stable across runs).
    #[arg(long)]
    pub(crate) sarif: Option<PathBuf>,
    /// Append a Markdown summary to FILE (counts, advisories reproduced, failures and warnings
    /// by family with each trial's first finding): `--summary-md "$GITHUB_STEP_SUMMARY"`.
    #[arg(long, value_name = "FILE")]
    pub(crate) summary_md: Option<PathBuf>,
    /// Known failures (format mcp-gauntlet-baseline/1; YAML when FILE ends in .yaml or .yml,
    /// JSON otherwise): listed failures pass, unlisted failures fail, listed cases that now pass
    /// fail as stale.
    #[arg(long)]
    pub(crate) baseline: Option<PathBuf>,
    /// Write this run's failures as a baseline to FILE (YAML for .yaml/.yml, JSON otherwise).
    #[arg(long)]
    pub(crate) write_baseline: Option<PathBuf>,
    /// How many trials run at once (default: the number of cores; for the embedded default,
    /// whose in-process targets are copied for each trial, four per core). Each stdio trial is its own
    /// process and each HTTP trial its own connection and session, so the report is the same
    /// whatever N; `--jobs 1` for a target that cannot take several sessions at once. (libtest's
    /// `-- --test-threads N` still works, and wins.)
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) jobs: Option<u16>,
    /// No trial lines: the end of the run lists the failed trials and prints the counts; on a
    /// terminal a live counter (trials done, elapsed time) shows meanwhile.
    #[arg(long, short = 'q')]
    pub(crate) quiet: bool,
    /// Run only the cases that reproduce a published advisory (`cases/advisories.json`); the
    /// run ends with the advisories the target reproduced.
    #[arg(long)]
    pub(crate) advisories: bool,
    /// Run only the cases that reproduce this advisory (a CVE, GHSA or RUSTSEC id, or an
    /// upstream issue as owner/repo#N; repeatable). `mcp-gauntlet advisories` lists them.
    #[arg(long = "advisory", value_name = "ID", value_parser = parse_advisory)]
    pub(crate) advisory: Vec<&'static mcp_gauntlet::advisory::Advisory>,
    /// The package the target is, as ECOSYSTEM:NAME (`npm:@modelcontextprotocol/sdk`,
    /// `PyPI:mcp`): an advisory of that package whose weakness shows is REPRODUCED; any
    /// other's is "as in" it. Without it, the target's `serverInfo` name is compared.
    #[arg(long, value_name = "ECOSYSTEM:NAME", value_parser = parse_package)]
    pub(crate) package: Option<(String, String)>,
    /// Run only shard K of N (1-based), e.g. `--shard 2/4`, to split a run across CI jobs.
    #[arg(long, value_parser = parse_shard)]
    pub(crate) shard: Option<(usize, usize)>,
    /// Arguments for the libtest harness: a filter, --list, --exact, --test-threads N, --format json...
    #[arg(last = true)]
    pub(crate) libtest: Vec<String>,
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct CampaignArgs {
    #[command(subcommand)]
    pub(crate) merge: Option<CampaignCommand>,
    /// The folder of target files.
    #[arg(required = true)]
    pub(crate) targets: Option<PathBuf>,
    /// Where each lane's report, JUnit, log and record go, and the matrix (matrix.md, .html,
    /// .json). A campaign started again over the same folder runs only the lanes not done.
    #[arg(long, required = true)]
    pub(crate) out: Option<PathBuf>,
    /// Where recipes install (reused between campaigns).
    #[arg(long, default_value = "target/campaign-cache")]
    pub(crate) cache: PathBuf,
    /// Only this target (by name; repeatable).
    #[arg(long = "target", value_name = "NAME")]
    pub(crate) only: Vec<String>,
    /// The slow lanes (a target file's `slow: true`): `with` them, `without` them, or `only` them.
    #[arg(long, default_value = "with")]
    pub(crate) slow: mcp_gauntlet::campaign::Slow,
    /// How many targets run at once, each its lanes one after the other.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) targets_at_once: u16,
    /// How many trials of a lane run at once (`run --jobs`; default: the number of cores).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) jobs: Option<u16>,
    /// Run only shard K of N (1-based) of the lanes; `campaign merge` builds the matrix after.
    #[arg(long, value_parser = parse_shard)]
    pub(crate) shard: Option<(usize, usize)>,
    /// The versions each lane speaks (as `run --spec`).
    #[arg(long, default_value = "accepted")]
    pub(crate) spec: Spec,
    /// Also write the matrix's Markdown to FILE, and its HTML beside it (only from a full
    /// campaign: every lane, every case).
    #[arg(long, value_name = "FILE")]
    pub(crate) matrix: Option<PathBuf>,
    /// Also write the ecosystem pages into DIR (README.md, packages/NAME.md): a survey of
    /// packages without baselines, whose failures are findings, not a failed campaign.
    #[arg(long, value_name = "DIR")]
    pub(crate) ecosystem: Option<PathBuf>,
    /// libtest arguments for every lane: filters, `--skip`.
    #[arg(last = true)]
    pub(crate) libtest: Vec<String>,
}

#[derive(Subcommand, Debug)]
pub(crate) enum CampaignCommand {
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
pub(crate) struct WitnessArgs {
    /// Serve Streamable HTTP on ADDR (e.g. 127.0.0.1:0); prints `listening http://ADDR/mcp` first.
    #[arg(long, conflicts_with_all = ["stdio", "sse"], required_unless_present_any = ["stdio", "sse"])]
    pub(crate) http: Option<String>,
    /// Serve the HTTP+SSE transport of 2024-11-05 on ADDR: `GET /sse` opens a session's event
    /// stream, its `endpoint` event names `/messages?session_id=ID`; prints
    /// `listening http://ADDR/sse` first. It speaks 2024-11-05 and the legacy versions after it.
    #[arg(long, value_name = "ADDR", conflicts_with = "stdio")]
    pub(crate) sse: Option<String>,
    /// Serve on stdin/stdout.
    #[arg(long)]
    pub(crate) stdio: bool,
    /// Serve HTTP over TLS with this certificate chain (PEM, leaf first); needs --tls-key.
    #[arg(long, value_name = "FILE", requires_all = ["http", "tls_key"])]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// HTTP: require an OAuth access token on every request, validated as this JSON says (the
    /// reference gate's `auth` section: resource, issuer, jwks_file or jwks_url, ...).
    #[arg(long, value_name = "FILE", requires = "http")]
    pub(crate) auth_config: Option<PathBuf>,
    /// With --auth-config: TOOL needs SCOPE (`TOOL=SCOPE`, repeatable); a call without it gets
    /// 403 insufficient_scope.
    #[arg(long, value_name = "TOOL=SCOPE", requires = "auth_config")]
    pub(crate) auth_tool_scope: Vec<String>,
    /// Append every received message and every tool run to FILE as JSON lines.
    #[arg(long)]
    pub(crate) log: Option<PathBuf>,
    /// Streamable HTTP: answer requests with SSE streams (when the client accepts them)
    /// instead of JSON.
    #[arg(long, requires = "http")]
    pub(crate) sse_answers: bool,
    /// With --http: also serve the HTTP+SSE transport (2024-11-05) on the same port, at `/sse`
    /// and `/messages`, as servers that keep it for older clients do.
    #[arg(long, requires = "http")]
    pub(crate) also_sse: bool,
    /// Deliberately wrong behaviours, for proving that cases can fail (comma-separated or repeated).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub(crate) broken: Vec<Broken>,
    /// Allowed but unusual behaviours of real servers, for proving that verdicts are not
    /// narrower than the specification (comma-separated or repeated).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub(crate) quirk: Vec<Quirk>,
    /// How it reads ambiguous JSON: like the downstream servers a gate sits in front of.
    #[arg(long, value_enum, default_value_t = Personality::Strict)]
    pub(crate) personality: Personality,
    /// The protocol versions it speaks (comma-separated): legacy ones through initialize, modern
    /// ones per request. Default: 2025-06-18, 2025-11-25 and 2026-07-28.
    #[arg(long, value_delimiter = ',')]
    pub(crate) versions: Vec<mcp_gauntlet::versions::Version>,
    /// What the canary tool answers when it runs (default CANARY-EXECUTED).
    #[arg(long)]
    pub(crate) canary_text: Option<String>,
    /// HTTP: issue no Mcp-Session-Id and serve requests without one (the SDKs' stateless mode).
    #[arg(long)]
    pub(crate) stateless: bool,
    /// Append a line to FILE each time the canary runs (an execution side channel).
    #[arg(long)]
    pub(crate) canary_log: Option<PathBuf>,
}

pub(crate) fn parse_scale(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if (0.01..=100.0).contains(&f) => Ok(f),
        _ => Err("expected a number from 0.01 to 100".into()),
    }
}

pub(crate) fn parse_shard(s: &str) -> Result<(usize, usize), String> {
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

pub(crate) fn parse_deny_style(s: &str) -> Result<DenyStyle, String> {
    s.parse()
}

/// `--gate-codes`: `reference`, or one table for every version. The legacy table, then the
/// modern one.
pub(crate) fn parse_gate_codes(s: &str) -> Result<(CodeTable, CodeTable), String> {
    if s == "reference" {
        return Ok((CodeTable::LEGACY, CodeTable::MODERN));
    }
    let table: CodeTable = s.parse()?;
    Ok((table, table))
}

pub(crate) fn parse_profile(s: &str) -> Result<Profile, String> {
    match s {
        "server" => Ok(Profile::Server),
        "gate" => Ok(Profile::Gate),
        _ => Err("expected `server` or `gate`".into()),
    }
}

/// What the runner knows of an HTTP endpoint's authorization (`auth/` cases).
#[derive(Args, Debug)]
pub(crate) struct AuthArgs {
    /// An access token the endpoint accepts: sent on every request, and the base of the
    /// `auth/` cases' bad tokens (alg none, broken signature).
    #[arg(long, value_name = "TOKEN")]
    pub(crate) auth_token: Option<String>,
    /// The issuer's private key (PKCS#8 PEM, EC P-256; `mcp-gauntlet auth-issuer` makes one):
    /// the runner mints the good token (unless --auth-token) and the expired, not-yet-valid,
    /// wrong-audience, wrong-issuer and HMAC-confusion tokens.
    #[arg(long, value_name = "FILE", requires_all = ["auth_issuer", "auth_audience"])]
    pub(crate) auth_issuer_key: Option<PathBuf>,
    /// The `iss` of minted tokens (the endpoint's trusted authorization server).
    #[arg(long, value_name = "URL", requires = "auth_issuer_key")]
    pub(crate) auth_issuer: Option<String>,
    /// The `aud` of minted tokens: the endpoint's resource URI.
    #[arg(long, value_name = "URI", requires = "auth_issuer_key")]
    pub(crate) auth_audience: Option<String>,
    /// The key id minted tokens carry.
    #[arg(long, default_value = "gauntlet-1")]
    pub(crate) auth_kid: String,
    /// The `scope` claim of the minted good token (space-separated).
    #[arg(long, default_value = "")]
    pub(crate) auth_scopes: String,
    /// A tool the good token's scopes do not cover: a call must get 403 insufficient_scope.
    #[arg(long, value_name = "TOOL")]
    pub(crate) auth_scoped_tool: Option<String>,
}

/// `--advisory ID`: an advisory of `cases/advisories.json`, by id or alias.
pub(crate) fn parse_advisory(
    id: &str,
) -> Result<&'static mcp_gauntlet::advisory::Advisory, String> {
    mcp_gauntlet::advisory::find(id).ok_or_else(|| {
        format!("`{id}` is not in the advisory catalogue (`mcp-gauntlet advisories` lists it)")
    })
}

/// `--package ECOSYSTEM:NAME`.
pub(crate) fn parse_package(s: &str) -> Result<(String, String), String> {
    mcp_gauntlet::advisory::Subject::parse_package(s)
        .ok_or_else(|| format!("`{s}` is not ECOSYSTEM:NAME (npm:@modelcontextprotocol/sdk)"))
}
