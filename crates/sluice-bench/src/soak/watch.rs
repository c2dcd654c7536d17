//! What the soak reads of the gateway's process as it runs: resident memory, open file
//! descriptors by what they are (client connections, upstream connections, other sockets,
//! files and the rest), from `/proc`; and its own metrics page (`sluice_runtime_tasks`,
//! requests in flight, what the features did).

use std::collections::HashSet;

use anyhow::Context;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Open descriptors of the gateway, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub(super) struct Fds {
    /// Connections from clients (to the gateway's port).
    pub(super) client: u32,
    /// Connections to the upstream (the simulator's port).
    pub(super) upstream: u32,
    /// Every other socket (listeners, the ledger's, the runtime's).
    pub(super) other_sockets: u32,
    /// Everything else: files, pipes, event and timer descriptors.
    pub(super) rest: u32,
}

impl Fds {
    /// All of them.
    pub(super) fn total(&self) -> u32 {
        self.client + self.upstream + self.other_sockets + self.rest
    }
}

/// The gateway's process, as the soak watches it.
pub(super) struct Watched {
    pid: u32,
    port: u16,
    upstream_port: u16,
}

impl Watched {
    /// The process `pid`, serving on `port`, its upstream on `upstream_port`.
    pub(super) fn new(pid: u32, port: u16, upstream_port: u16) -> anyhow::Result<Self> {
        Ok(Self {
            pid,
            port,
            upstream_port,
        })
    }

    /// Resident memory now (VmRSS), MiB.
    pub(super) fn rss_mib(&self) -> anyhow::Result<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .context("reading the gateway's /proc status")?;
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .context("no VmRSS in the gateway's /proc status")?
            .parse()?;
        Ok(kib / 1024.0)
    }

    /// Open descriptors now, by kind.
    pub(super) fn fds(&self) -> anyhow::Result<Fds> {
        let (client, upstream) = self.connection_inodes()?;
        let mut fds = Fds::default();
        let dir = std::fs::read_dir(format!("/proc/{}/fd", self.pid))
            .context("listing the gateway's descriptors")?;
        for entry in dir {
            // A descriptor closed between the listing and the read: not open any more.
            let Ok(link) = std::fs::read_link(entry?.path()) else {
                continue;
            };
            let link = link.to_string_lossy();
            let Some(inode) = link
                .strip_prefix("socket:[")
                .and_then(|s| s.strip_suffix(']'))
                .and_then(|s| s.parse::<u64>().ok())
            else {
                fds.rest += 1;
                continue;
            };
            if client.contains(&inode) {
                fds.client += 1;
            } else if upstream.contains(&inode) {
                fds.upstream += 1;
            } else {
                fds.other_sockets += 1;
            }
        }
        Ok(fds)
    }

    /// The socket inodes of client connections and of upstream connections, from the
    /// process's TCP tables.
    fn connection_inodes(&self) -> anyhow::Result<(HashSet<u64>, HashSet<u64>)> {
        let (mut client, mut upstream) = (HashSet::new(), HashSet::new());
        for table in ["tcp", "tcp6"] {
            let text = std::fs::read_to_string(format!("/proc/{}/net/{table}", self.pid))
                .with_context(|| format!("reading the gateway's /proc net/{table}"))?;
            for line in text.lines().skip(1) {
                let f: Vec<&str> = line.split_whitespace().collect();
                let (Some(local), Some(remote), Some(state), Some(inode)) =
                    (f.get(1), f.get(2), f.get(3), f.get(9))
                else {
                    continue;
                };
                let Ok(inode) = inode.parse::<u64>() else {
                    continue;
                };
                // 0A: listening.
                if port_of(local) == Some(self.port) && *state != "0A" {
                    client.insert(inode);
                } else if port_of(remote) == Some(self.upstream_port) {
                    upstream.insert(inode);
                }
            }
        }
        Ok((client, upstream))
    }

    /// The gateway's metrics page now, on a connection of its own that the gateway closes
    /// before this returns (so that it is never counted among the client connections).
    pub(super) async fn metrics(&self) -> anyhow::Result<Page> {
        let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .context("connecting to scrape the gateway's /metrics")?;
        conn.write_all(b"GET /metrics HTTP/1.1\r\nhost: soak\r\nconnection: close\r\n\r\n")
            .await?;
        let mut page = Vec::new();
        conn.read_to_end(&mut page).await?;
        let page = String::from_utf8_lossy(&page).into_owned();
        let (head, body) = page
            .split_once("\r\n\r\n")
            .context("the gateway's /metrics answer has no head")?;
        anyhow::ensure!(
            head.starts_with("HTTP/1.1 200"),
            "/metrics answered {}",
            head.lines().next().unwrap_or_default()
        );
        Ok(Page(dechunk(body)))
    }
}

/// A body sent in chunks (`transfer-encoding: chunked`) put back together; a body sent whole
/// is left as it is (a metrics page never starts with a hexadecimal length line).
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            return body.to_string();
        };
        if n == 0 {
            return out;
        }
        let Some(chunk) = after.get(..n) else {
            return body.to_string();
        };
        out.push_str(chunk);
        rest = after.get(n + 2..).unwrap_or_default();
    }
    body.to_string()
}

/// The port of a `/proc/net/tcp` address (`0100007F:1F90`).
fn port_of(address: &str) -> Option<u16> {
    let (_, port) = address.rsplit_once(':')?;
    u16::from_str_radix(port, 16).ok()
}

/// A metrics page in the text format.
pub(super) struct Page(String);

impl Page {
    /// The sum of family `name`'s samples whose labels hold `labels` (every one when empty).
    pub(super) fn sum(&self, name: &str, labels: &str) -> f64 {
        self.0
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let rest = l.strip_prefix(name)?;
                let (series, value) = rest.rsplit_once(' ')?;
                let labelled = series.starts_with('{') || series.is_empty();
                (labelled && series.contains(labels)).then(|| value.parse::<f64>().ok())?
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_read_from_hex() {
        assert_eq!(port_of("0100007F:1F90"), Some(8080));
        assert_eq!(port_of("00000000000000000000000001000000:0050"), Some(80));
        assert_eq!(port_of("nonsense"), None);
    }

    #[test]
    fn chunked_bodies_are_put_back_together() {
        assert_eq!(
            dechunk("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            "hello world"
        );
        assert_eq!(dechunk("# HELP x y\nx 1\n"), "# HELP x y\nx 1\n");
    }

    #[test]
    fn families_sum_over_matching_labels() {
        let page = Page(
            "# HELP sluice_hedges_total x\nsluice_hedges_total{group=\"a\",outcome=\"won\"} 3\n\
             sluice_hedges_total{group=\"b\",outcome=\"lost\"} 4\nsluice_hedges_totalx 9\n\
             sluice_runtime_tasks 12\n"
                .into(),
        );
        assert_eq!(page.sum("sluice_hedges_total", ""), 7.0);
        assert_eq!(page.sum("sluice_hedges_total", "outcome=\"won\""), 3.0);
        assert_eq!(page.sum("sluice_runtime_tasks", ""), 12.0);
        assert_eq!(page.sum("sluice_absent", ""), 0.0);
    }
}
