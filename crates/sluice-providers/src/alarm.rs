//! A timer that a stream polls on every wake-up for almost nothing: once it holds the
//! task's waker, a poll from the same task only looks whether it has fired.
//!
//! A stream's body is polled several times a chunk (each chunk, then the poll that finds
//! nothing more, then wake-ups meant for the connection's other half). Polling a tokio
//! `Sleep` each time re-registers the waker with the timer, an atomic exchange and a
//! clock read that a chunk can do without: the waker of a task does not change between
//! polls, so it is registered again only when it does (or after a reset).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};

use tokio::time::{Instant, Sleep, sleep_until};

/// One deadline, cheap to poll again from the task that first polled it.
#[derive(Debug)]
pub struct Alarm {
    sleep: Pin<Box<Sleep>>,
    /// The waker the timer holds, when it holds one: a poll with the same waker does not
    /// register it again.
    held: Option<Waker>,
}

impl Alarm {
    /// An alarm for `at`.
    pub fn at(at: Instant) -> Self {
        Self {
            sleep: Box::pin(sleep_until(at)),
            held: None,
        }
    }

    /// When it fires.
    pub fn deadline(&self) -> Instant {
        self.sleep.deadline()
    }

    /// Moves it to `at` (the next poll registers the waker again).
    pub fn reset(&mut self, at: Instant) {
        self.sleep.as_mut().reset(at);
        self.held = None;
    }

    /// Whether it has fired. When it has not, the task of `cx` is woken once it does.
    pub fn poll_fired(&mut self, cx: &mut Context<'_>) -> bool {
        if let Some(held) = &self.held
            && held.will_wake(cx.waker())
        {
            return self.sleep.is_elapsed();
        }
        let fired = self.sleep.as_mut().poll(cx).is_ready();
        self.held = (!fired).then(|| cx.waker().clone());
        fired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn fires_at_its_deadline_when_polled_again_from_the_same_task() {
        let start = Instant::now();
        let mut alarm = Alarm::at(start + Duration::from_millis(50));
        let mut polls = 0;
        std::future::poll_fn(|cx| {
            polls += 1;
            if alarm.poll_fired(cx) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await;
        assert_eq!(Instant::now() - start, Duration::from_millis(50));
        assert_eq!(polls, 2, "registered once, woken once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_reset_moves_the_deadline_and_registers_again() {
        let start = Instant::now();
        let mut alarm = Alarm::at(start + Duration::from_millis(50));
        let moved = std::cell::Cell::new(false);
        std::future::poll_fn(|cx| {
            if !alarm.poll_fired(cx) {
                return std::task::Poll::Pending;
            }
            if moved.replace(true) {
                return std::task::Poll::Ready(());
            }
            alarm.reset(Instant::now() + Duration::from_millis(30));
            assert!(!alarm.poll_fired(cx));
            std::task::Poll::Pending
        })
        .await;
        assert_eq!(Instant::now() - start, Duration::from_millis(80));
        assert_eq!(alarm.deadline(), start + Duration::from_millis(80));
    }

    #[tokio::test(start_paused = true)]
    async fn another_waker_is_registered_in_place_of_the_first() {
        let mut alarm = Alarm::at(Instant::now() + Duration::from_millis(10));
        let first = futures::task::noop_waker();
        assert!(!alarm.poll_fired(&mut Context::from_waker(&first)));
        // The task that waits now is another one: it, not the first, must be woken.
        std::future::poll_fn(|cx| {
            if alarm.poll_fired(cx) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await;
    }
}
