//! `sluice bench ...`: the benchmarks live in their own binary, `sluice-bench`, so that the
//! shipped `sluice` holds the product only; this runs it, found beside `sluice` (or named in
//! `SLUICE_BENCH_BIN`), with the same arguments.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// The benchmarks' binary.
fn binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("SLUICE_BENCH_BIN") {
        return Ok(PathBuf::from(path));
    }
    let me = std::env::current_exe().context("finding this binary")?;
    let beside = me.with_file_name("sluice-bench");
    anyhow::ensure!(
        beside.exists(),
        "the benchmarks are a binary of their own, and there is no `sluice-bench` beside {}: \
         build it with `cargo build --release -p sluice-bench`, or name it in SLUICE_BENCH_BIN",
        me.display()
    );
    Ok(beside)
}

/// Runs `sluice-bench ARGS...`, its exit code this command's; on Unix it takes this
/// process's place, so that a benchmark's process is the one that was started.
pub fn run(args: &[OsString]) -> anyhow::Result<ExitCode> {
    let exe = binary()?;
    let mut cmd = std::process::Command::new(&exe);
    cmd.args(args);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let e = cmd.exec();
        Err(e).with_context(|| format!("running {}", exe.display()))
    }
    #[cfg(not(unix))]
    {
        let status = cmd
            .status()
            .with_context(|| format!("running {}", exe.display()))?;
        Ok(ExitCode::from(
            u8::try_from(status.code().unwrap_or(1)).unwrap_or(1),
        ))
    }
}
