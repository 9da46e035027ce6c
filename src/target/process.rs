//! Target lifetime: the processes the runner starts (a `--gate`, a `--serve` server, a stdio
//! gate's lanes), and how a lane's dead HTTP target is noticed and started again.

use super::*;

/// A stdio gate: `{downstream_cmd}` in `template` becomes a stdio witness of `personality`
/// logging per case, as one shell-quoted string; `{downstream_argv}` the same command as words.
pub(crate) fn gate_stdio_lane(
    template: &str,
    exe: &Path,
    tmp: &Path,
    personality: Personality,
) -> Lane {
    let witness = stdio_witness_command(exe, personality);
    // `{downstream_argv}`: the same command as separate words, for gates that take their
    // downstream as an argument list (`my-gate -- {downstream_argv}`), not through a shell.
    let argv = shell_words::split(&witness)
        .map(shell_words::join)
        .unwrap_or_else(|_| witness.clone());
    let command = template
        .replace("{downstream_cmd}", &shell_words::quote(&witness))
        .replace("{downstream_argv}", &argv);
    plain_lane(
        TransportKind::Stdio,
        Profile::Gate,
        Endpoint::stdio(command, Some(tmp.to_path_buf())),
        None,
    )
    .behind(personality)
}

/// An HTTP gate the runner starts: `{downstream_url}` is an in-process witness of
/// `personality`, `{port}` a free loopback port where the gate must serve `/mcp`. Waits
/// (bounded) until the port accepts.
pub(crate) fn gate_http_lane(
    template: &str,
    rt: &Runtime,
    keep: &mut Keep,
    personality: Personality,
) -> Result<Lane, RunError> {
    let (downstream, record) = start_witness(rt, keep, personality)?;
    let process = Arc::new(start_process(
        template,
        &[("{downstream_url}", downstream.to_url())],
    )?);
    let port = process.port;
    keep.gates.push(process.clone());
    let mut lane = plain_lane(
        TransportKind::Http,
        Profile::Gate,
        Endpoint::Http(HttpUrl::parse(&format!("http://127.0.0.1:{port}/mcp"))?),
        Some(WitnessView::Memory(record)),
    )
    .behind(personality);
    // The gate's own process is what a series measures (the witness behind it is the
    // runner's).
    lane.watch = Some(process.watch());
    lane.process = Some(process);
    Ok(lane)
}

/// An HTTP server the runner starts (`--serve`) on a free loopback port, serving `path`.
pub(super) fn served_lane(
    template: &str,
    path: &str,
    profile: Profile,
    keep: &mut Keep,
) -> Result<Lane, RunError> {
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    let process = Arc::new(start_process(template, &[])?);
    keep.gates.push(process.clone());
    let port = process.port;
    let mut lane = plain_lane(
        TransportKind::Http,
        profile,
        Endpoint::Http(HttpUrl::parse(&format!("http://127.0.0.1:{port}{path}"))?),
        None,
    );
    lane.watch = Some(process.watch());
    lane.process = Some(process);
    Ok(lane)
}

/// Start `template` with `{port}` a free loopback port (and each `(name, value)` of `more`
/// replaced), waiting (bounded) until the port accepts.
pub(super) fn start_process(
    template: &str,
    more: &[(&str, String)],
) -> Result<GateProcess, RunError> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(RunError::Setup)?
        .port();
    let mut command = template.replace("{port}", &port.to_string());
    for (name, value) in more {
        command = command.replace(name, value);
    }
    let words = shell_words::split(&command).map_err(|_| RunError::BadTarget(command.clone()))?;
    let (program, args) = words
        .split_first()
        .ok_or_else(|| RunError::BadTarget(command.clone()))?;
    let process = GateProcess {
        program: program.clone(),
        args: args.to_vec(),
        port,
        child: std::sync::Mutex::new(None),
    };
    // A program that cannot be found is a target that cannot be tested, as for --stdio.
    let started = process.start().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => {
            RunError::Untestable {
                target: command.clone(),
                kind: crate::error::Untestable::NoProgram,
                reason: format!("its program `{program}` cannot be started: {e}"),
            }
        }
        _ => RunError::Setup(e),
    })?;
    if !started {
        return Err(RunError::GateDidNotStart(port));
    }
    Ok(process)
}

/// An HTTP gate the runner started (`--gate`), which it can start again on the same port when a
/// case leaves it broken or dead.
#[derive(Debug)]
pub struct GateProcess {
    program: String,
    args: Vec<String>,
    port: u16,
    child: std::sync::Mutex<Option<std::process::Child>>,
}

impl GateProcess {
    /// How long a started gate has to accept connections.
    const START_WITHIN: Duration = Duration::from_secs(10);

    /// End the running process (if any), start the command again, and wait (bounded) until its
    /// port accepts. Whether it did; an error when the command cannot be started at all.
    pub(super) fn start(&self) -> std::io::Result<bool> {
        self.stop();
        let child = std::process::Command::new(&self.program)
            .args(&self.args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        *crate::sync::lock(&self.child) = Some(child);
        let deadline = std::time::Instant::now() + Self::START_WITHIN;
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if std::time::Instant::now() > deadline {
                return Ok(false);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(true)
    }

    /// Where a lane reads this process: whichever one runs at the time (it is started again
    /// after a series or a death).
    pub(super) fn watch(self: &Arc<Self>) -> crate::transport::procfs::Watch {
        let followed = self.clone();
        crate::transport::procfs::Watch::following(move || followed.pid())
    }

    /// The process running now, if one is.
    pub(super) fn pid(&self) -> Option<u32> {
        crate::sync::lock(&self.child)
            .as_ref()
            .map(std::process::Child::id)
    }

    /// Kill the process and reap it.
    pub(super) fn stop(&self) {
        if let Some(mut c) = crate::sync::lock(&self.child).take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// How a run brings a dead HTTP target back (`--restart-cmd`), and the processes it started.
pub(crate) struct Restarts {
    command: Option<String>,
    children: std::sync::Mutex<Vec<std::process::Child>>,
}

impl Restarts {
    /// Restarts with `command` (`sh -c`), or none.
    pub fn new(command: Option<String>) -> Restarts {
        Restarts {
            command,
            children: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Start the restart command and wait (30 s at most) until the lane's endpoint accepts
    /// connections again (a process the runner started: started again, 10 s); why not.
    pub(super) fn restart(&self, lane: &Lane) -> Result<(), NotRestarted> {
        if let Some(process) = &lane.process {
            return match process.start() {
                Ok(true) => Ok(()),
                Ok(false) => Err(NotRestarted::NotListening),
                Err(e) => Err(NotRestarted::Respawn(e)),
            };
        }
        let Some(command) = &self.command else {
            return Err(NotRestarted::NoCommand);
        };
        let child = std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(NotRestarted::CommandSpawn)?;
        crate::sync::lock(&self.children).push(child);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            if lane.reachable() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(NotRestarted::CommandTimedOut)
    }

    /// Kill every process the restart command left running.
    pub(crate) fn stop(&self) {
        for c in crate::sync::lock(&self.children).iter_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Record that the lane's target died during `case_id` (said once on stderr), and restart
    /// it when the run can. `gone.already` says the case found it gone before its own bytes
    /// were sent, `gone.listening` that it still takes connections but failed its alive check
    /// (a gate the runner started is then started again); `others` are the trials in flight
    /// beside it (`[lane] case`), any of which may have ended it. The text for the trial.
    pub(crate) fn mark_dead(
        &self,
        lane: &Lane,
        case_id: &str,
        gone: Gone,
        others: &[String],
    ) -> String {
        let running = if others.is_empty() {
            String::new()
        } else {
            format!("; running beside it: {}", others.join(", "))
        };
        let stopped = if gone.listening {
            "stopped answering (it takes connections but failed its alive check)"
        } else {
            "stopped accepting connections"
        };
        let when = if gone.already && gone.listening {
            format!("could not be set up for this case (a trial before it, or beside it, may have broken it{running})")
        } else if gone.already {
            format!("was not accepting connections when this case began (a trial before it, or beside it, ended it{running})")
        } else if others.is_empty() {
            format!("{stopped} after this case")
        } else {
            format!("{stopped} after this case (it or a trial beside it ended it{running})")
        };
        let name = format!("[{}] {case_id}", lane.id);
        let mut died = crate::sync::lock(&lane.died_during);
        if died.is_none() {
            eprintln!("the target {when}: {name}; this trial fails with the evidence");
            *died = Some(name);
        }
        match self.restart(lane) {
            Ok(()) => {
                if lane.process.is_some() {
                    eprintln!("the target the runner started (--gate, --serve) was started again; the run goes on");
                } else {
                    eprintln!("the target was restarted with --restart-cmd; the run goes on");
                }
                *died = None;
                format!("the target {when} (it was restarted)")
            }
            Err(why) => {
                if matches!(
                    why,
                    NotRestarted::Respawn(_) | NotRestarted::CommandSpawn(_)
                ) {
                    eprintln!("{}", crate::error::error_chain(&why));
                }
                format!(
                    "the target {when}; the lane's later trials are not run ({})",
                    crate::error::error_chain(&why)
                )
            }
        }
    }
}

/// Why a target that died was not brought back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NotRestarted {
    /// The process the runner started (`--gate`, `--serve`) did not listen again in time.
    #[error("started again, it did not accept connections within 10 s")]
    NotListening,
    /// The process the runner started could not be started again.
    #[error("it could not be started again")]
    Respawn(#[source] std::io::Error),
    /// `--restart-cmd` could not be started.
    #[error("the restart command could not be started")]
    CommandSpawn(#[source] std::io::Error),
    /// `--restart-cmd` ran, and the target did not accept connections within 30 s.
    #[error("the restart command did not bring it back within 30 s")]
    CommandTimedOut,
    /// Nothing can restart it.
    #[error("give --restart-cmd to restart it")]
    NoCommand,
}

/// How a trial found its HTTP target gone.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Gone {
    /// Before the case's own bytes were sent.
    pub already: bool,
    /// It still takes connections (but failed its alive check).
    pub listening: bool,
}

impl Lane {
    /// Start the process the runner started for this lane again (after a series, which leaves
    /// state behind it): whether it came up, or `None` for a lane without one.
    pub(crate) fn start_afresh(&self) -> Option<bool> {
        let process = self.process.as_ref()?;
        Some(process.start().unwrap_or(false))
    }

    /// Why a trial on this lane is not run: its target died earlier and was not brought back.
    pub fn down(&self) -> Option<NotRun> {
        let died_during = crate::sync::lock(&self.died_during).clone()?;
        Some(NotRun { died_during })
    }
}

/// Why a trial was not run: its lane's target died during an earlier trial and was not brought
/// back. Said as `not run: the target stopped accepting connections after [lane] case`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NotRun {
    /// The trial it died during, `[lane] case`.
    pub died_during: String,
}

impl std::fmt::Display for NotRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "not run: the target stopped accepting connections after {}",
            self.died_during
        )
    }
}
