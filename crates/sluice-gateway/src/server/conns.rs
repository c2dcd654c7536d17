//! The accept loop: each connection served by hyper (HTTP/1.1, or HTTP/2 when the client
//! opens with it), told to finish gracefully when the server closes, and waited for.
//!
//! A connection watches for the close on every wake-up, and a streamed answer wakes its
//! connection several times a chunk. A tokio watch channel (what `axum::serve` uses) takes a
//! lock on each of those polls, about 400 instructions a streamed chunk in
//! `scripts/instructions --stream`; here a connection registers its waker once and then reads
//! one flag.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Waker};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::task::TaskTracker;

use super::ConnLimits;
use super::stall::Stall;

/// Serves `router` on `listener` until `close` resolves; then stops accepting, asks every
/// open connection to finish what it is doing (HTTP/1.1: the answer in progress, then the
/// connection closes; HTTP/2: a GOAWAY) and returns once all have.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnLimits,
    close: impl Future<Output = ()>,
) {
    let closing = Arc::new(Closing::default());
    let connections = TaskTracker::new();
    let builder = builder(limits);
    let mut full = false;
    let mut close = pin!(close);
    loop {
        let accepted = tokio::select! {
            () = &mut close => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((tcp, peer)) => {
                if connections.len() >= limits.max_connections {
                    // Closed as it arrives: the client sees the connection end at once.
                    if !full {
                        tracing::warn!(
                            max_connections = limits.max_connections,
                            "at the connection limit: new connections are closed"
                        );
                    }
                    full = true;
                    tracing::debug!(%peer, "a connection past the limit closed");
                    drop(tcp);
                    continue;
                }
                full = false;
                // Without TCP_NODELAY a small write (a stream's chunk, or headers sent apart
                // from the body) waits up to 40 ms for the peer's delayed ACK.
                if let Err(e) = tcp.set_nodelay(true) {
                    tracing::debug!("could not set TCP_NODELAY: {e}");
                }
                connections.spawn(connection(
                    builder.clone(),
                    tcp,
                    router.clone(),
                    Watch::new(closing.clone()),
                    limits,
                ));
            }
            Err(e) if is_connection_error(&e) => {}
            Err(e) => {
                // Out of file descriptors, say: accepting again at once would spin.
                tracing::error!("accepting a connection: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    drop(listener);
    closing.close();
    connections.close();
    connections.wait().await;
}

/// hyper's connection settings for `limits`: HTTP/1.1 heads read within the timeout (which
/// also closes a keep-alive connection idle that long) into a buffer no larger than the
/// head limit; HTTP/2 header lists no larger than it either.
fn builder(limits: ConnLimits) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
    builder
}

/// An error that ends one connection, not the listener.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// One connection, to its end; closed at once when its client sends nothing within
/// `first_bytes` (hyper's own header timeout starts only once it knows the HTTP version,
/// which it learns from those bytes); its writes bounded in waiting by the stall timeout.
async fn connection(
    builder: auto::Builder<TokioExecutor>,
    tcp: TcpStream,
    router: Router,
    mut watch: Watch,
    limits: ConnLimits,
) {
    let mut byte = [0u8; 1];
    match tokio::time::timeout(limits.header_timeout, tcp.peek(&mut byte)).await {
        Ok(Ok(n)) if n > 0 => {}
        // Silent past the timeout, closed, or failed: nothing to serve.
        _ => return,
    }
    let service = TowerToHyperService::new(router);
    let io = TokioIo::new(Stall::new(tcp, limits.stall_timeout));
    let mut conn = pin!(builder.serve_connection_with_upgrades(io, service));
    let mut told = false;
    let ended = std::future::poll_fn(|cx| {
        if !told && watch.poll_closed(cx) {
            told = true;
            conn.as_mut().graceful_shutdown();
        }
        conn.as_mut().poll(cx)
    })
    .await;
    if let Err(e) = ended {
        // A client that goes away mid-request, or speaks something else than HTTP.
        tracing::trace!("connection ended: {e}");
    }
}

/// The server's close, as every connection sees it.
#[derive(Debug, Default)]
struct Closing {
    closed: AtomicBool,
    /// The waker of each connection that has looked, by its number.
    waiting: Mutex<HashMap<u64, Waker>>,
    next: AtomicU64,
}

impl Closing {
    /// Sets the flag and wakes every connection that looked before.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let waiting = std::mem::take(&mut *self.lock());
        for waker in waiting.into_values() {
            waker.wake();
        }
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, HashMap<u64, Waker>> {
        self.waiting.lock()
    }
}

/// One connection's view of [`Closing`].
#[derive(Debug)]
struct Watch {
    closing: Arc<Closing>,
    id: u64,
    /// The waker [`Closing`] holds for this connection, when it holds one.
    registered: Option<Waker>,
}

impl Watch {
    fn new(closing: Arc<Closing>) -> Self {
        let id = closing.next.fetch_add(1, Ordering::Relaxed);
        Self {
            closing,
            id,
            registered: None,
        }
    }

    /// Whether the server is closing; if not, the task of `cx` is woken when it does. The
    /// waker is handed over once (again only if the task's waker changes): a wake-up reads
    /// the flag and compares two pointers.
    fn poll_closed(&mut self, cx: &mut Context<'_>) -> bool {
        if self.closing.closed.load(Ordering::Acquire) {
            return true;
        }
        if self
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            return false;
        }
        self.closing.lock().insert(self.id, cx.waker().clone());
        self.registered = Some(cx.waker().clone());
        // A close between the first look and the registration has taken the map already.
        self.closing.closed.load(Ordering::Acquire)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if self.registered.is_some() {
            self.closing.lock().remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    /// Counts its wake-ups.
    struct Counter(AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter() -> (Arc<Counter>, Waker) {
        let c = Arc::new(Counter(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    #[test]
    fn a_connection_registers_once_and_is_woken_by_the_close() {
        let closing = Arc::new(Closing::default());
        let mut watch = Watch::new(closing.clone());
        let (count, waker) = counter();
        let mut cx = Context::from_waker(&waker);
        assert!(!watch.poll_closed(&mut cx));
        assert!(!watch.poll_closed(&mut cx));
        assert_eq!(closing.lock().len(), 1, "one registration for two polls");
        closing.close();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(watch.poll_closed(&mut cx));
    }

    #[test]
    fn a_new_waker_replaces_the_old_and_a_dropped_watch_leaves_nothing() {
        let closing = Arc::new(Closing::default());
        let mut watch = Watch::new(closing.clone());
        let (first, w1) = counter();
        let (second, w2) = counter();
        assert!(!watch.poll_closed(&mut Context::from_waker(&w1)));
        assert!(!watch.poll_closed(&mut Context::from_waker(&w2)));
        closing.close();
        assert_eq!(first.0.load(Ordering::SeqCst), 0);
        assert_eq!(second.0.load(Ordering::SeqCst), 1);

        let closing = Arc::new(Closing::default());
        let mut gone = Watch::new(closing.clone());
        assert!(!gone.poll_closed(&mut Context::from_waker(&w1)));
        drop(gone);
        assert!(closing.lock().is_empty());
    }

    #[test]
    fn a_connection_that_looks_after_the_close_sees_it() {
        let closing = Arc::new(Closing::default());
        closing.close();
        let (_, waker) = counter();
        assert!(Watch::new(closing).poll_closed(&mut Context::from_waker(&waker)));
    }
}
