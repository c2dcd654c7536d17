//! A `sluice` child process for benchmarks (the binary beside this one): started with a config written to a temporary
//! file, waited for until its readiness URL answers, killed when dropped.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

/// A running child.
pub struct Child {
    process: std::process::Child,
    /// The config file written for it, removed when it is dropped.
    config: Option<PathBuf>,
}

/// The `sluice` binary the benchmarks start: `SLUICE_BIN` when set, else the one beside
/// this binary (cargo builds both into the same folder).
pub fn sluice_binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("SLUICE_BIN") {
        return Ok(PathBuf::from(path));
    }
    let me = std::env::current_exe().context("finding this binary")?;
    let beside = me.with_file_name("sluice");
    if beside.exists() {
        Ok(beside)
    } else {
        anyhow::bail!(
            "no `sluice` binary beside {}: build it (cargo build --release -p sluice-cli) or name \
             it in SLUICE_BIN",
            me.display()
        )
    }
}

/// The file name of `exe`, for messages.
fn exe_name(exe: &std::path::Path) -> String {
    exe.file_name().map_or_else(
        || exe.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// A free loopback port (bound, read, released).
pub fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

impl Child {
    /// Runs `sluice COMMAND --config FILE` with `config` in FILE, and waits for `ready_url`.
    /// With `cpus` (a list such as `1` or `2-3`), the child is pinned there with `taskset`.
    pub async fn spawn(
        command: &str,
        config: &str,
        ready_url: &str,
        cpus: Option<&str>,
    ) -> anyhow::Result<Self> {
        let path = std::env::temp_dir().join(format!(
            "sluice-bench-{}-{command}.toml",
            std::process::id()
        ));
        std::fs::File::create(&path)
            .and_then(|mut f| f.write_all(config.as_bytes()))
            .with_context(|| format!("writing {}", path.display()))?;
        let args = [
            command.into(),
            "--config".into(),
            path.clone().into_os_string(),
        ];
        let mut child = Self::spawn_args(&args, ready_url, cpus).await;
        if let Ok(c) = &mut child {
            c.config = Some(path);
        } else {
            // Never started: nothing else will remove it.
            let _ = std::fs::remove_file(&path);
        }
        child
    }

    /// Runs `sluice ARGS...` and waits for `ready_url`, pinned to `cpus` when given.
    pub async fn spawn_args(
        args: &[std::ffi::OsString],
        ready_url: &str,
        cpus: Option<&str>,
    ) -> anyhow::Result<Self> {
        Self::spawn_program(sluice_binary()?, args, ready_url, cpus).await
    }

    /// Runs this benchmarks' binary with `ARGS...` (the bare forwarder) and waits for
    /// `ready_url`, pinned to `cpus` when given.
    pub async fn spawn_bench(
        args: &[std::ffi::OsString],
        ready_url: &str,
        cpus: Option<&str>,
    ) -> anyhow::Result<Self> {
        let me = std::env::current_exe().context("finding this binary")?;
        Self::spawn_program(me, args, ready_url, cpus).await
    }

    /// Runs `exe ARGS...` and waits for `ready_url`, pinned to `cpus` when given.
    async fn spawn_program(
        exe: PathBuf,
        args: &[std::ffi::OsString],
        ready_url: &str,
        cpus: Option<&str>,
    ) -> anyhow::Result<Self> {
        let what = args
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
        let name = exe_name(&exe);
        let mut cmd = match cpus {
            Some(list) => {
                let mut c = std::process::Command::new("taskset");
                c.arg("-c").arg(list).arg(exe);
                c
            }
            None => std::process::Command::new(exe),
        };
        let process = cmd
            .args(args)
            .env("SLUICE_LOG", "warn")
            .spawn()
            .with_context(|| format!("starting {name} {what}"))?;
        let child = Self {
            process,
            config: None,
        };
        let client = reqwest_free_get(ready_url);
        tokio::time::timeout(Duration::from_secs(15), client)
            .await
            .with_context(|| format!("sluice {what} did not become ready at {ready_url}"))??;
        Ok(child)
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    /// CPU time (user + system) the child has used so far, from /proc.
    pub fn cpu_seconds(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.process.id())).ok()?;
        // Fields after the command name, which is in parentheses and may hold spaces.
        let rest = stat.get(stat.rfind(')')? + 2..)?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        // Linux reports clock ticks; USER_HZ is 100 on every mainstream build.
        Some((utime + stime) / 100.0)
    }

    /// Peak resident memory (VmHWM) in MiB, from /proc.
    pub fn peak_rss_mib(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.process.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib / 1024.0)
    }
}

/// Polls `url` until it answers 200. Polling is fine here: this is a benchmark's start-up,
/// not a test.
async fn reqwest_free_get(url: &str) -> anyhow::Result<()> {
    let uri: http::Uri = url.parse()?;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    loop {
        if let Ok(r) = client.get(uri.clone()).await
            && r.status().is_success()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        if let Some(config) = &self.config {
            let _ = std::fs::remove_file(config);
        }
    }
}
