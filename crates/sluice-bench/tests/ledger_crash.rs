//! The embedded ledger under a crash: a process settling calls as fast as it can is killed
//! with SIGKILL; every row it had acknowledged (printed its id after the commit) is in the
//! file when it is opened again, the file is sound, and a restarted process goes on writing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use sluice_ledger::{Durability, SqliteStore, Store, UsageQuery};

fn writer(db: &Path, prefix: &str, entries: u64) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice-bench"));
    c.args(["ledger", "--acks", "--concurrency", "64"])
        .args(["--entries", &entries.to_string(), "--prefix", prefix])
        .arg("--path")
        .arg(db)
        .env("SLUICE_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    c
}

/// Complete lines only: a line the kill cut short is not an acknowledgement.
fn read_acks(out: &mut impl BufRead, acked: &mut Vec<String>, want: Option<usize>) {
    let mut line = Vec::new();
    loop {
        if want.is_some_and(|n| acked.len() >= n) {
            return;
        }
        line.clear();
        match out.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line.ends_with(b"\n") => {
                acked.push(String::from_utf8_lossy(&line[..line.len() - 1]).into_owned());
            }
            Ok(_) => return,
        }
    }
}

fn stored(db: &Path) -> (HashSet<String>, usize, String) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = SqliteStore::open(db, Durability::Disk).await.unwrap();
        let rows = store
            .entries(&UsageQuery::default(), u32::MAX)
            .await
            .unwrap();
        let n = rows.len();
        let ids = rows.into_iter().map(|e| e.request_id.to_string()).collect();
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", db.display()))
            .await
            .unwrap();
        let check: (String,) = sqlx::query_as("PRAGMA integrity_check")
            .fetch_one(&pool)
            .await
            .unwrap();
        (ids, n, check.0)
    })
}

#[test]
fn a_kill_9_loses_no_acknowledged_row_and_a_restart_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ledger.db");

    let mut child = writer(&db, "first", 100_000_000).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut acked = Vec::new();
    read_acks(&mut out, &mut acked, Some(5_000));
    // SIGKILL, mid-load: no chance to flush or close anything.
    child.kill().unwrap();
    read_acks(&mut out, &mut acked, None);
    child.wait().unwrap();
    assert!(acked.len() >= 5_000);

    let (ids, rows, check) = stored(&db);
    assert_eq!(check, "ok");
    let lost: Vec<&String> = acked.iter().filter(|id| !ids.contains(*id)).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged rows lost, e.g. {:?}",
        lost.len(),
        lost.first()
    );
    assert!(rows >= acked.len());
    eprintln!(
        "{} acknowledged, {rows} on disk after the kill",
        acked.len()
    );

    // A restart on the same file resumes: new rows land beside the old ones.
    let out = writer(&db, "second", 3_000).output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 3_000);
    let (after, rows_after, check) = stored(&db);
    assert_eq!(check, "ok");
    assert_eq!(rows_after, rows + 3_000);
    assert!(acked.iter().all(|id| after.contains(id)));
}
