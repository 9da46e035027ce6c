//! Recipes: each target installed once into the campaign's cache (`{env}`), again only when what
//! the recipe reads changed. A registry that cannot be reached skips the target, saying so; an
//! install that fails while the registry answers fails it.

use super::file::{Ecosystem, Recipe, TargetFile};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long one install may take (a cold pip or cargo build on a slow machine).
const INSTALL_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// How long the reachability probe of a registry may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// What installing a target came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installed {
    /// Ready: its install folder (`{env}`; the target's folder for `command` and `builtin`).
    At(PathBuf),
    /// Not tested, and not failed: why (a registry unreachable, a tool missing).
    Skipped(String),
}

/// Why an install failed although it could have worked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    #[error("`{what}` failed (exit {code:?}); its output is in {log}")]
    Failed {
        what: String,
        code: Option<i32>,
        log: String,
    },
    #[error("`{what}` took more than {secs} s; its output is in {log}")]
    TimedOut {
        what: String,
        secs: u64,
        log: String,
    },
    #[error("cannot prepare {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Install `t` under `cache` (once per recipe contents).
pub fn install(t: &TargetFile, cache: &Path) -> Result<Installed, InstallError> {
    if matches!(t.spec.install, Recipe::Command | Recipe::Builtin) {
        return Ok(Installed::At(t.dir.clone()));
    }
    // `{env}` is absolute: a command that changes its folder before it uses it still finds it.
    let cache = &std::path::absolute(cache).unwrap_or_else(|_| cache.to_path_buf());
    let env = cache.join(format!("{}-{}", t.name, t.release()));
    let stamp = env.join(".gauntlet-recipe");
    let want = fingerprint(t);
    // Cargo builds its peer's own sources too: it always runs, and builds only what changed.
    let cargo = matches!(t.spec.install, Recipe::Cargo { .. });
    if !cargo && std::fs::read_to_string(&stamp).is_ok_and(|s| s == want) {
        // The copies are cheap and may have changed without the recipe (a server script).
        copy_extras(t, &env)?;
        return Ok(Installed::At(env));
    }
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| InstallError::Io { path, source }
    };
    std::fs::create_dir_all(cache).map_err(io(cache))?;
    if env.exists() && !cargo {
        std::fs::remove_dir_all(&env).map_err(io(&env))?;
    }
    std::fs::create_dir_all(&env).map_err(io(&env))?;
    let log = cache.join(format!("{}-{}.install.log", t.name, t.release()));
    let steps = match steps(t, &env) {
        Ok(s) => s,
        Err(missing) => return Ok(Installed::Skipped(missing)),
    };
    copy_extras(t, &env)?;
    for (mut step, network) in steps {
        if let Err(e) = run_logged(&mut step, &log) {
            // Only a step that reaches a registry may fail for want of one.
            if let Some(host) = network
                .then(|| unreachable_registry(t.spec.ecosystem))
                .flatten()
            {
                return Ok(Installed::Skipped(format!(
                    "the {} registry ({host}) cannot be reached from here",
                    t.spec.ecosystem.as_str()
                )));
            }
            return Err(e);
        }
    }
    std::fs::write(&stamp, want).map_err(io(&stamp))?;
    Ok(Installed::At(env))
}

/// The commands that install `t` into `env`, each with whether it reaches a registry; `Err`:
/// the tool they need is missing.
fn steps(t: &TargetFile, env: &Path) -> Result<Vec<(Command, bool)>, String> {
    let needs = |tool: &str| -> Result<(), String> {
        match Command::new(tool).arg("--version").output() {
            Ok(o) if o.status.success() => Ok(()),
            _ => Err(format!("`{tool}` is not on this machine")),
        }
    };
    let mut out = Vec::new();
    match &t.spec.install {
        Recipe::Pypi {
            requirements,
            packages,
        } => {
            needs("python3")?;
            let mut venv = Command::new("python3");
            venv.args(["-m", "venv"]).arg(env);
            out.push((venv, false));
            let mut pip = Command::new(env.join("bin/pip"));
            pip.args(["install", "--quiet", "--disable-pip-version-check"]);
            if let Some(r) = requirements {
                pip.arg("-r").arg(t.beside(r));
            }
            pip.args(packages);
            // pip told to read no index (a folder of wheels) reaches no registry.
            let no_index = std::env::var("PIP_NO_INDEX")
                .is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false" | "no" | "off"));
            out.push((pip, !no_index));
        }
        Recipe::Npm {
            folder, packages, ..
        } => {
            needs("npm")?;
            let mut npm = Command::new("npm");
            npm.current_dir(env)
                .args(["--silent", "--no-audit", "--no-fund"]);
            let locked = folder
                .as_ref()
                .is_some_and(|d| t.beside(&format!("{d}/package-lock.json")).is_file());
            if locked {
                npm.arg("ci");
            } else {
                npm.arg("install").args(packages);
            }
            out.push((npm, true));
        }
        Recipe::Cargo { manifest } => {
            needs("cargo")?;
            let mut fetch = Command::new("cargo");
            fetch
                .args(["fetch", "--locked", "--quiet", "--manifest-path"])
                .arg(t.beside(manifest));
            // Everything fetched, the build reaches no registry: its failure is the build's.
            let mut build = Command::new("cargo");
            build
                .args(["build", "--locked", "--offline", "--release", "--quiet"])
                .arg("--manifest-path")
                .arg(t.beside(manifest))
                .env("CARGO_TARGET_DIR", env);
            out.push((fetch, true));
            out.push((build, false));
        }
        Recipe::Command | Recipe::Builtin => {}
    }
    Ok(out)
}

/// The files an npm recipe copies into its folder: its package.json (made from `packages`
/// when it has none), its lockfile, and `copy`.
fn copy_extras(t: &TargetFile, env: &Path) -> Result<(), InstallError> {
    let Recipe::Npm { folder, copy, .. } = &t.spec.install else {
        return Ok(());
    };
    let io = |path: PathBuf| {
        let path = path.display().to_string();
        move |source| InstallError::Io { path, source }
    };
    let Some(d) = folder else {
        let manifest = env.join("package.json");
        if !manifest.exists() {
            std::fs::write(&manifest, "{\"private\": true}\n").map_err(io(manifest))?;
        }
        return Ok(());
    };
    let files = ["package.json", "package-lock.json"]
        .into_iter()
        .map(str::to_string)
        .chain(copy.iter().cloned());
    for f in files {
        let from = t.beside(&format!("{d}/{f}"));
        // Beside the package, by its own name (`../server.mjs` shared by several releases' folders).
        let Some(name) = Path::new(&f).file_name() else {
            continue;
        };
        if from.is_file() {
            std::fs::copy(&from, env.join(name)).map_err(io(from))?;
        }
    }
    Ok(())
}

/// Run `cmd`, its output appended to `log`, under [`INSTALL_TIMEOUT`].
fn run_logged(cmd: &mut Command, log: &Path) -> Result<(), InstallError> {
    let what = format!("{cmd:?}").replace('"', "");
    let io = |source| InstallError::Io {
        path: log.display().to_string(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(io)?;
    let err = file.try_clone().map_err(io)?;
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(file)
        .stderr(err)
        .spawn()
        .map_err(io)?;
    let end = Instant::now() + INSTALL_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().map_err(io)? {
            return if status.success() {
                Ok(())
            } else {
                Err(InstallError::Failed {
                    what,
                    code: status.code(),
                    log: log.display().to_string(),
                })
            };
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return Err(InstallError::TimedOut {
                what,
                secs: INSTALL_TIMEOUT.as_secs(),
                log: log.display().to_string(),
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The registry's host and port when it cannot be reached (`None`: it answers, or is no
/// network address). Where the installers are pointed elsewhere (`PIP_INDEX_URL`,
/// `npm_config_registry`), there; through the proxy the environment names, the proxy.
fn unreachable_registry(ecosystem: Ecosystem) -> Option<String> {
    let var = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| std::env::var(n).ok().filter(|v| !v.is_empty()))
    };
    let url = match ecosystem {
        Ecosystem::PyPi => var(&["PIP_INDEX_URL"]).unwrap_or_else(|| "https://pypi.org".into()),
        Ecosystem::Npm => var(&["npm_config_registry", "NPM_CONFIG_REGISTRY"])
            .unwrap_or_else(|| "https://registry.npmjs.org".into()),
        Ecosystem::Crates => "https://index.crates.io".into(),
        Ecosystem::None => return None,
    };
    if !url.starts_with("http://") && !url.starts_with("https://") {
        return None;
    }
    let proxy = if url.starts_with("https://") {
        var(&["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"])
    } else {
        var(&["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"])
    };
    let url = proxy.unwrap_or(url);
    let (scheme, rest) = url.split_once("://").unwrap_or(("https", url.as_str()));
    let authority = rest.split('/').next().unwrap_or(rest);
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let host_port = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_string()
    } else {
        format!("{authority}:{}", if scheme == "http" { 80 } else { 443 })
    };
    use std::net::ToSocketAddrs;
    let reachable = host_port.to_socket_addrs().ok().is_some_and(|mut addrs| {
        addrs.any(|a| std::net::TcpStream::connect_timeout(&a, PROBE_TIMEOUT).is_ok())
    });
    (!reachable).then_some(host_port)
}

/// `bytes` hashed (FNV-1a, 64 bits), in hex: a cache key, not a defence.
pub(crate) fn fnv(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// What the recipe reads, hashed: a change means a new install.
pub(crate) fn fingerprint(t: &TargetFile) -> String {
    let mut all = serde_json::to_string(&t.spec.install)
        .expect("a recipe serializes: strings and lists")
        .into_bytes();
    all.extend(t.release().as_bytes());
    let files: Vec<String> = match &t.spec.install {
        Recipe::Pypi { requirements, .. } => requirements.iter().cloned().collect(),
        Recipe::Npm { folder, .. } => folder
            .iter()
            .flat_map(|d| {
                [
                    format!("{d}/package.json"),
                    format!("{d}/package-lock.json"),
                ]
            })
            .collect(),
        Recipe::Cargo { manifest } => {
            let lock = Path::new(manifest).with_file_name("Cargo.lock");
            vec![manifest.clone(), lock.display().to_string()]
        }
        Recipe::Command | Recipe::Builtin => Vec::new(),
    };
    for f in files {
        all.extend(std::fs::read(t.beside(&f)).unwrap_or_default());
    }
    fnv(&all)
}
