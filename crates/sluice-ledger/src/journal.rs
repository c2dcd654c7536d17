//! The writer's local journal: while the ledger's store cannot answer, rows are appended here
//! (one JSON line each, flushed to the disk) instead of held in memory, and replayed into the
//! store in order once it answers. How far the replay got is kept beside it (`.done`), so a
//! restart goes on from there; a killed replay may write its last chunk twice (a batch item's
//! row is still kept once: the ledger takes one row per item).

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Entry;

/// One journal line: a row, and whether its spend was settled in the store already.
#[derive(Serialize, Deserialize)]
struct Line {
    entry: Entry,
    settled_in_ledger: bool,
}

/// The journal file and how far it has been replayed.
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
    done: PathBuf,
    file: File,
    /// Where the replay is, and where the file ends (bytes).
    read_at: u64,
    end: u64,
    /// Rows written and not yet replayed.
    pending: u64,
}

/// What can go wrong with the journal: the disk (full, gone) or a line that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The file could not be read or written.
    #[error("the ledger's journal {path}: {source}")]
    Io {
        /// The journal's path.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
}

impl Journal {
    /// Opens (creating) the journal at `path`, going on from where an earlier replay got.
    pub(crate) fn open(path: &Path) -> Result<Self, JournalError> {
        let io = |source| JournalError::Io {
            path: path.display().to_string(),
            source,
        };
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        let end = file.metadata().map_err(io)?.len();
        let done = path.with_extension("journal.done");
        let read_at = std::fs::read_to_string(&done)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0)
            .min(end);
        let mut journal = Self {
            path: path.to_path_buf(),
            done,
            file,
            read_at,
            end,
            pending: 0,
        };
        journal.pending = journal.count()?;
        Ok(journal)
    }

    fn io(&self, source: std::io::Error) -> JournalError {
        JournalError::Io {
            path: self.path.display().to_string(),
            source,
        }
    }

    fn count(&self) -> Result<u64, JournalError> {
        let mut f = File::open(&self.path).map_err(|e| self.io(e))?;
        f.seek(SeekFrom::Start(self.read_at))
            .map_err(|e| self.io(e))?;
        Ok(BufReader::new(f).lines().count() as u64)
    }

    /// Rows written and not yet replayed.
    pub(crate) fn pending(&self) -> u64 {
        self.pending
    }

    /// Appends `entries`, flushed to the disk before this returns.
    pub(crate) fn append(&mut self, entries: &[Entry]) -> Result<(), JournalError> {
        let mut buf = Vec::new();
        for e in entries {
            let line = Line {
                settled_in_ledger: e.settled_in_ledger,
                entry: e.clone(),
            };
            serde_json::to_writer(&mut buf, &line)
                .map_err(|e| self.io(std::io::Error::other(e)))?;
            buf.push(b'\n');
        }
        self.file.write_all(&buf).map_err(|e| self.io(e))?;
        self.file.sync_data().map_err(|e| self.io(e))?;
        self.end += buf.len() as u64;
        self.pending += entries.len() as u64;
        Ok(())
    }

    /// Up to `max` rows from where the replay is, and the offset after them. A line that does
    /// not parse is logged and counted in `unreadable`, and passed over.
    pub(crate) fn read(
        &self,
        max: usize,
        unreadable: &mut u64,
    ) -> Result<(Vec<Entry>, u64, u64), JournalError> {
        let mut f = File::open(&self.path).map_err(|e| self.io(e))?;
        f.seek(SeekFrom::Start(self.read_at))
            .map_err(|e| self.io(e))?;
        let mut reader = BufReader::new(f);
        let (mut out, mut at, mut lines) = (Vec::new(), self.read_at, 0);
        let mut text = String::new();
        while out.len() < max {
            text.clear();
            let n = reader.read_line(&mut text).map_err(|e| self.io(e))?;
            if n == 0 || !text.ends_with('\n') {
                break;
            }
            at += n as u64;
            lines += 1;
            match serde_json::from_str::<Line>(&text) {
                Ok(l) => {
                    let mut e = l.entry;
                    e.settled_in_ledger = l.settled_in_ledger;
                    out.push(e);
                }
                Err(e) => {
                    *unreadable += 1;
                    tracing::error!(error = %e, journal = %self.path.display(), "a line of the ledger's journal does not parse; it is passed over");
                }
            }
        }
        Ok((out, at, lines))
    }

    /// The replay got to `to`, past `lines` rows: kept beside the journal; once all of it is
    /// replayed, the journal starts empty again.
    pub(crate) fn advance(&mut self, to: u64, lines: u64) -> Result<(), JournalError> {
        self.read_at = to;
        self.pending = self.pending.saturating_sub(lines);
        if self.read_at >= self.end {
            self.file.set_len(0).map_err(|e| self.io(e))?;
            self.file.sync_data().map_err(|e| self.io(e))?;
            (self.read_at, self.end, self.pending) = (0, 0, 0);
            let _ = std::fs::remove_file(&self.done);
            return Ok(());
        }
        std::fs::write(&self.done, to.to_string()).map_err(|e| self.io(e))
    }
}
