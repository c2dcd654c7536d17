//! A client connection whose writes may not wait forever: when the client stops taking
//! bytes (its receive window full, a reader that stopped reading), a write that has waited
//! `limit` fails, hyper ends the connection, and the answer's body is dropped (a stream's
//! upstream then read on for its usage). Reads pass through: an idle keep-alive connection
//! is hyper's header timeout's business, a stalled body the walk's.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `io` with its writes bounded in waiting.
#[derive(Debug)]
pub struct Stall<T> {
    io: T,
    limit: Duration,
    /// Set when a write first waited, cleared when one makes progress.
    waiting: Option<Pin<Box<Sleep>>>,
}

impl<T> Stall<T> {
    pub fn new(io: T, limit: Duration) -> Self {
        Self {
            io,
            limit,
            waiting: None,
        }
    }

    /// What a write that could not go on says: progress clears the clock, a wait starts it
    /// (or goes on with it), and a wait past the limit is an error.
    fn judge<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if polled.is_ready() {
            self.waiting = None;
            return polled;
        }
        let limit = self.limit;
        let clock = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        ready!(clock.as_mut().poll(cx));
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the client took no bytes for {limit:?}"),
        )))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Stall<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Stall<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        self.judge(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.judge(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_flush(cx);
        self.judge(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_write_the_peer_never_takes_fails_at_the_limit() {
        let (near, mut far) = tokio::io::duplex(64);
        let mut s = Stall::new(near, Duration::from_secs(60));
        // The first 64 bytes fit the pipe; the rest wait for a reader that never comes.
        let started = tokio::time::Instant::now();
        let err = s.write_all(&[7u8; 1024]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(60));
        let mut got = [0u8; 64];
        far.read_exact(&mut got).await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_keeps_taking_is_never_cut() {
        let (near, mut far) = tokio::io::duplex(16);
        let mut s = Stall::new(near, Duration::from_secs(60));
        let reader = tokio::spawn(async move {
            let mut all = Vec::new();
            let mut piece = [0u8; 16];
            // 16 bytes every 50 s: slow, but never 60 s without taking any.
            while all.len() < 256 {
                tokio::time::sleep(Duration::from_secs(50)).await;
                let n = far.read(&mut piece).await.unwrap();
                all.extend_from_slice(&piece[..n]);
            }
            all
        });
        s.write_all(&[1u8; 256]).await.unwrap();
        assert_eq!(reader.await.unwrap(), vec![1u8; 256]);
    }
}
