//! A PostgreSQL server of a test's own (Debian's package, which `scripts/test` installs), on
//! a private port and data directory, which the test can stop and start again; run as the
//! package's `postgres` user when the test runs as root, as PostgreSQL requires.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// A private PostgreSQL server.
pub struct OwnPostgres {
    pub port: u16,
    dir: tempfile::TempDir,
    bin: PathBuf,
    running: bool,
}

/// The newest installed PostgreSQL's programs.
fn bin() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is not installed: run ./scripts/test, which installs it")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("pg_ctl").exists())
        .collect();
    found.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    found.pop().expect("no pg_ctl under /usr/lib/postgresql")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl OwnPostgres {
    /// A fresh cluster (`initdb`, user `sluice`, trust) started on a free port.
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        if is_root() {
            let ok = Command::new("chown")
                .args(["postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(ok.success(), "chown postgres");
        }
        let mut pg = Self {
            port: super::free_port(),
            dir,
            bin: bin(),
            running: false,
        };
        let data = pg.dir.path().join("data");
        let ok = pg
            .run("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-U", "sluice", "-A", "trust"])
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success(), "initdb failed");
        pg.resume().await;
        pg
    }

    /// `program` of the server, as the user that may run it.
    fn run(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    /// Its URL, to database `postgres`.
    pub fn url(&self) -> String {
        format!("postgres://sluice@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts the server (again) and waits until it answers.
    pub async fn resume(&mut self) {
        let d = self.dir.path();
        let ok = self
            .run("pg_ctl")
            .arg("-D")
            .arg(d.join("data"))
            .arg("-l")
            .arg(d.join("log"))
            .arg("-w")
            .arg("-o")
            .arg(format!(
                "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
                self.port,
                d.display()
            ))
            .arg("start")
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success(), "pg_ctl start failed");
        self.running = true;
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("PostgreSQL did not start");
    }

    /// Stops the server at once (`-m immediate`, as a crash would).
    pub fn stop(&mut self) {
        if std::mem::replace(&mut self.running, false) {
            let _ = self
                .run("pg_ctl")
                .arg("-D")
                .arg(self.dir.path().join("data"))
                .args(["-m", "immediate", "-w", "stop"])
                .stdout(std::process::Stdio::null())
                .status();
        }
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        self.stop();
    }
}
